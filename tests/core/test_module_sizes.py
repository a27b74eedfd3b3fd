"""One screen per idea (DESIGN.md): every module under globaltensor/ and every C++/CUDA source under kernels/
and bindings/ is at most 400 lines and says its concept on its first line (a docstring; a one-sentence `//`
comment). Offenders are listed with their counts."""
import ast
import os

import globaltensor

ROOT = os.path.dirname(globaltensor.__file__)
REPO = os.path.dirname(ROOT)
MAX_LINES = 400
NATIVE_FOLDERS = ("kernels", "bindings")
NATIVE_SUFFIXES = (".cpp", ".cu", ".h")


def _modules():
    for folder, _, files in os.walk(ROOT):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                yield os.path.relpath(path, ROOT), path


def _over_limit(files):
    """'name: N lines' for each (name, path) longer than MAX_LINES."""
    long = []
    for name, path in files:
        with open(path) as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            long.append(f"{name}: {n} lines")
    return long


def test_every_module_is_at_most_400_lines():
    long = _over_limit((f"globaltensor/{rel}", path) for rel, path in _modules())
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


def _native_sources():
    """(kernels/x.cpp, path) for every C++/CUDA source and header of the extension."""
    for folder in NATIVE_FOLDERS:
        for f in sorted(os.listdir(os.path.join(REPO, folder))):
            if f.endswith(NATIVE_SUFFIXES):
                yield f"{folder}/{f}", os.path.join(REPO, folder, f)


def test_native_sources_are_found():
    names = [rel for rel, _ in _native_sources()]
    assert "bindings/module.cpp" in names and "kernels/types.h" in names, names


def test_every_native_source_is_at_most_400_lines():
    long = _over_limit(_native_sources())
    assert not long, f"C++/CUDA sources over {MAX_LINES} lines (split them, one concept a file): " + "; ".join(long)


def _comment_problem(path):
    """Why the source does not open with a one-line `//` comment saying what it is, or None."""
    with open(path) as f:
        first = f.readline().rstrip("\n")
    if not first.startswith("//"):
        return "the first line is not a // comment"
    text = first[2:].strip()
    if not text:
        return "the first line's comment is empty (say the file's concept there)"
    if not text.endswith("."):
        return "the first line's comment runs on (say the concept in one sentence on that line)"
    return None


def test_every_native_source_opens_with_a_one_line_comment():
    missing = [f"{rel}: {why}" for rel, path in _native_sources() if (why := _comment_problem(path))]
    assert not missing, "C++/CUDA sources without a one-line opening comment: " + "; ".join(missing)


def test_tests_live_in_their_subsystem_folders():
    import conftest
    tests = os.path.join(os.path.dirname(ROOT), "tests")
    loose = [f for f in os.listdir(tests) if f.startswith("test_")]
    folders = sorted(d for d in os.listdir(tests) if os.path.isdir(os.path.join(tests, d))
                     and d not in ("scripts", "__pycache__"))
    assert not loose, f"tests at the top of tests/ (put each in its subsystem's folder): {loose}"
    assert folders == sorted(conftest.SUBSYSTEMS), "a new test folder: add it to conftest.SUBSYSTEMS"
