"""An all_gather across hosts trusts the sizes every rank passes (no exchange): a rank whose array disagrees
still makes every rank raise, with non-blocking MPI calls (GLOBALTENSOR_INTERHOST_BLOCKING_BYTES=0) (issue 32)."""
import pytest

from test_two_hosts import _env, _two_host_job, needs_hosts

pytestmark = pytest.mark.timeout(120)


@needs_hosts
def test_an_all_gather_whose_sizes_lie_raises_on_every_rank(tmp_path):
    got = _two_host_job(tmp_path, "gather_lie", env={**_env(), "GLOBALTENSOR_TIMEOUT": "3",
                                                       "GLOBALTENSOR_INTERHOST_BLOCKING_BYTES": "0"}, timeout=90)
    assert got[3].startswith("ValueError: all_gather: rank 3 passes 24 bytes"), got[3]
    for message in got[:3]:
        assert message.startswith("CollectiveError") or "rank 3" in message, message
