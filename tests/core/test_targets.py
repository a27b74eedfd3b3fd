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


def test_the_spec_matches_shared():
    """docs/SPEC.md, the public contract a clone carries, is shared/SPEC.md."""
    from targets import ROOT
    original = os.path.join(SHARED, "SPEC.md")
    if not os.path.exists(original):
        pytest.skip("no shared/ beside the repository")
    assert open(os.path.join(ROOT, "docs", "SPEC.md")).read() == open(original).read(), "copy shared/SPEC.md to docs/"
