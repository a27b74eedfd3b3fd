"""One screen per idea (DESIGN.md): every module under globaltensor/ is at most 400 lines and opens with its
one-line docstring (the concept, stated on the file's first line). Offenders are listed with their counts."""
import ast
import os

import globaltensor

ROOT = os.path.dirname(globaltensor.__file__)
MAX_LINES = 400


def _modules():
    for folder, _, files in os.walk(ROOT):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                yield os.path.relpath(path, ROOT), path


def test_every_module_is_at_most_400_lines():
    long = []
    for rel, path in _modules():
        with open(path) as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            long.append(f"globaltensor/{rel}: {n} lines")
    assert not long, f"modules over {MAX_LINES} lines (split them, one concept a module): " + "; ".join(long)


def _summary_problem(path):
    """Why the module does not open with a one-line docstring, or None."""
    source = open(path).read()
    body = ast.parse(source).body
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant) \
            or not isinstance(body[0].value.value, str):
        return "no module docstring"
    if body[0].lineno != 1:
        return "the docstring is not on the first line"
    first = body[0].value.value.split("\n", 1)[0].strip()
    if not first:
        return "the docstring's first line is empty (say the module's concept there)"
    return None


def test_every_module_opens_with_a_one_line_docstring():
    missing = [f"globaltensor/{rel}: {why}" for rel, path in _modules() if (why := _summary_problem(path))]
    assert not missing, "modules without a one-line docstring: " + "; ".join(missing)


def test_tests_live_in_their_subsystem_folders():
    import conftest
    tests = os.path.join(os.path.dirname(ROOT), "tests")
    loose = [f for f in os.listdir(tests) if f.startswith("test_")]
    folders = sorted(d for d in os.listdir(tests) if os.path.isdir(os.path.join(tests, d))
                     and d not in ("scripts", "__pycache__"))
    assert not loose, f"tests at the top of tests/ (put each in its subsystem's folder): {loose}"
    assert folders == sorted(conftest.SUBSYSTEMS), "a new test folder: add it to conftest.SUBSYSTEMS"
