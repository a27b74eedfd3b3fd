"""The test tree's own rules: spawned ranks import a test module by its bare name, so no two test files share one."""
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
