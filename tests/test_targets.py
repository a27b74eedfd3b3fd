"""The repository's copies of the coverage targets (docs/targets/) are those of shared/, where the
repository lies beside it (a clone alone has only the copies, which the tests read)."""
import os

import pytest

from targets import OPS_TARGET, PADDLE_API_INDEX, SHARED


@pytest.mark.parametrize("copy", [OPS_TARGET, PADDLE_API_INDEX], ids=os.path.basename)
def test_the_copies_match_shared(copy):
    original = os.path.join(SHARED, os.path.basename(copy))
    if not os.path.exists(original):
        pytest.skip("no shared/ beside the repository")
    assert open(copy).read() == open(original).read(), f"copy {original} to {copy}"
