"""Each tutorial notebook is generated from its .py twin; nbmake executes the notebooks."""
import os
import sys

import pytest

pytest.importorskip("nbformat", reason="nbformat comes with the test extra (nbmake)")
from conftest import REPO  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tutorials"))

import make_notebooks  # noqa: E402


def test_notebooks_match_their_py_twins():
    assert make_notebooks.main(check=True) == 0, "run: python tutorials/make_notebooks.py"
