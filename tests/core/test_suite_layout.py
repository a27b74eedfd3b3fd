"""The test tree's rules: unique module names (ranks import them bare), optional peers via importorskip, lazy torch."""
import collections
import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_test_module_names_are_unique_and_folders_are_not_packages():
    seen = collections.defaultdict(list)
    packages = []
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        if root != TESTS and "__init__.py" in files:
            packages.append(os.path.relpath(root, TESTS))
        for name in files:
            if name.endswith(".py"):
                seen[name].append(os.path.relpath(root, TESTS))
    shared = {name: places for name, places in seen.items() if len(places) > 1 and name != "conftest.py"}
    assert not shared, f"module names used in several test folders (a rank would import the wrong one): {shared}"
    assert not packages, f"test folders with __init__.py change how pytest names their modules: {packages}"


# optional peers: installed on developers' machines by hand, absent in CI (its install is ".[test]" alone)
_OPTIONAL = ("paddle", "mpi4py")


def test_optional_peers_are_imported_through_importorskip():
    """A plain `import paddle` in a test passes here and fails CI, which has no Paddle: the last CI run
    that did not land failed that way. Tests reach an optional peer by pytest.importorskip."""
    import re
    plain = re.compile(r"^\s*(?:import|from)\s+(%s)\b" % "|".join(_OPTIONAL), re.M)
    found = []
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                found += [f"{os.path.relpath(path, TESTS)}: {m.group(0).strip()}" for m in plain.finditer(text)]
    assert not found, f"optional peers imported without pytest.importorskip: {found}"


def test_modules_that_spawn_ranks_import_torch_on_first_use():
    """Each spawned rank imports its test module; torch at a module's top costs every rank ~1.5 s (it made a
    4-rank test 13 s instead of 2). Such modules take `from lazy_torch import torch`, or import torch inside
    the functions that compute the reference."""
    import re
    spawns = re.compile(r"\brun_ranks\(|\bspawn\(")
    top = re.compile(r"^(?:import torch\b|from torch\b|torch = pytest\.importorskip)", re.M)
    found = []
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if spawns.search(text) and top.search(text):
                    found.append(os.path.relpath(path, TESTS))
    assert not found, f"test modules that spawn ranks and import torch at their top: {found}"
