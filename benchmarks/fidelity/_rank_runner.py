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
            self._write(test=report.nodeid, outcome=outcome, when=report.when, error=error)

    def pytest_collectreport(self, report):
        if report.failed:
            self._write(test=report.nodeid or "<collect>", outcome="collect_error", error=_first_error(report.longrepr))


if __name__ == "__main__":
    out_dir, test_timeout, test_files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rank = os.environ.get("RANK", "0")
    code = pytest.main([*test_files, "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore",
                        "--continue-on-collection-errors"],
                       plugins=[Recorder(os.path.join(out_dir, f"rank{rank}.jsonl"), test_timeout)])
    sys.exit(0 if code in (0, 1, 5) else code)  # a failing test is a result, not a failing rank
