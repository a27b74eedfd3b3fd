"""One rank of a OneFlow test file's run: pytest with a plugin that appends each test's outcome to rank<R>.jsonl as it ends."""
import json
import os
import signal
import sys

import pytest


def _first_error(longrepr):
    """The line that says what went wrong: the crash message, else the last `E   ` line, else the last line."""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.splitlines()[0][:300]
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2])[:300]
    lines = [line for line in str(longrepr).splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors[-1] if errors else lines[-1] if lines else "")[:300]


def _where(report):
    """{"where": "file:line: source"} of the failing line inside the test file itself (the assertion or call that broke)."""
    entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", None) or []
    test_file = report.nodeid.split("::")[0]
    for entry in reversed(entries):
        loc = getattr(entry, "reprfileloc", None)
        if loc is not None and loc.path.endswith(test_file):
            lines = list(getattr(entry, "lines", []))
            marks = [i for i, line in enumerate(lines) if line.startswith(">")]
            statement = []  # the failing statement: its `>` line and the continuation lines before the `E` lines
            for line in lines[marks[-1]:] if marks else []:
                if line.startswith("E ") or (statement and line.startswith(">")):
                    break
                statement.append(line[1:].strip())
            return {"where": f"{test_file}:{loc.lineno}: {' '.join(statement)}"[:300]}
    return {}


class Recorder:
    """Writes {"test", "outcome", "error"} lines, flushed, so that a run cut by its timeout keeps what ended."""

    def __init__(self, path, test_timeout):
        self.out, self.test_timeout = open(path, "a", buffering=1), test_timeout
        signal.signal(signal.SIGALRM, self._alarm)

    def _alarm(self, *_):
        raise TimeoutError(f"the test ran past {self.test_timeout} s (the harness's per-test limit)")

    def pytest_runtest_setup(self, item):
        signal.alarm(self.test_timeout)

    def pytest_runtest_teardown(self, item, nextitem):
        signal.alarm(0)

    def _write(self, **record):
        self.out.write(json.dumps(record) + "\n")

    def pytest_runtest_logstart(self, nodeid, location):
        self._write(test=nodeid, outcome="started")

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            outcome = report.outcome if report.when == "call" or report.outcome == "skipped" else "error"
            error = "" if report.outcome == "passed" else _first_error(report.longrepr)
            self._write(test=report.nodeid, outcome=outcome, when=report.when, error=error, **_where(report))

    def pytest_collectreport(self, report):
        if report.failed:
            self._write(test=report.nodeid or "<collect>", outcome="collect_error", error=_first_error(report.longrepr))


class Stub:
    """A stand-in for a name globaltensor lacks, so that a module using it at import time loads (probe runs only)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<probe stand-in for flow.{self.name}>"


def install_stubs(names):
    """--probe: give globaltensor stand-ins for `names` it lacks (what OneFlow's test support reads at import)."""
    import globaltensor
    for name in names:
        if name and not hasattr(globaltensor, name):
            setattr(globaltensor, name, Stub(name))


if __name__ == "__main__":
    install_stubs(os.environ.get("GT_FIDELITY_STUBS", "").split(","))
    out_dir, test_timeout, test_files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rank = os.environ.get("RANK", "0")
    code = pytest.main([*test_files, "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore",
                        "--continue-on-collection-errors"],
                       plugins=[Recorder(os.path.join(out_dir, f"rank{rank}.jsonl"), test_timeout)])
    sys.exit(0 if code in (0, 1, 5) else code)  # a failing test is a result, not a failing rank
