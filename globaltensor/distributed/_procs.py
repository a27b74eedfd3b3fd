"""Rank processes for the launcher and spawn: start, stream output, stop all on first failure."""
import collections
import ctypes
import glob
import os
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():  # runs in the child between fork and exec
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def exit_code(returncode):
    """A shell-style exit code: 128 + signal number for a rank killed by a signal."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode):
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


_TRACEBACK_TEXT = "Traceback (most recent call last):"
_TRACEBACK = _TRACEBACK_TEXT.encode()
HOLD_SECONDS = 3.0  # a held traceback whose process lives on this long is printed after all


class Rank:
    """One rank's process, the tail of its stderr, and its log file."""

    def __init__(self, rank, proc, log, name=None):
        self.rank, self.proc, self.log = rank, proc, log
        self.name = name or f"rank {rank}"  # how output and reports call it ("server 0" in a PS job)
        self.stderr_tail = collections.deque(maxlen=40)
        self.threads = []
        self.held, self.held_at = [], None  # a traceback held back from the console, since when

    def held_exception(self):
        """The held traceback's exception: its first line ("Type: message") and the lines of a
        message of several, without the frames; [] when nothing is held."""
        last_frame = max((i for i, line in enumerate(self.held) if line.startswith("  File ")), default=-1)
        start = next((i for i in range(last_frame + 1, len(self.held))
                      if self.held[i] and not self.held[i][0].isspace()), len(self.held))
        return [line for line in self.held[start:] if line.strip()]


class Outcome:
    """How a wait ended: every rank succeeded, a rank failed, the time ran out, or a signal came."""

    def __init__(self, failed=None, timed_out=False, signum=None, remote=False):
        self.failed, self.timed_out, self.signum, self.remote = failed, timed_out, signum, remote

    @property
    def ok(self):
        return self.failed is None and not self.timed_out and self.signum is None and not self.remote


_LINE_WAIT = 0.2  # seconds other ranks' lines wait for a raw rank to end the line it is writing


class Supervisor:
    """Starts rank processes in their own sessions and tears all of them down together.

    write(rank, stream, text): where output goes. Rank processes die with the supervisor
    (PR_SET_PDEATHSIG), and each rank's whole process group is killed at teardown.
    """

    def __init__(self, write, log_dir=None, raw_ranks=(), hold_tracebacks=False):
        """hold_tracebacks: a rank's Python traceback is held back from the console (release_held,
        Rank.held_exception): the launcher prints the root cause's once and one line per other rank; one
        whose process goes on for HOLD_SECONDS (a handled, logged exception) is let through."""
        self.write, self.log_dir, self.raw_ranks = write, log_dir, set(raw_ranks)
        self.hold_tracebacks = hold_tracebacks
        self.ranks = []
        self._write_lock = threading.Condition()
        self._raw_mid_line = {"stdout": False, "stderr": False}  # a raw rank's line not ended yet
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)

    def start(self, rank, cmd, env, name=None, log_name=None, popen=None):
        """name: the prefix of its output lines (default "rank N"); log_name: its file in log_dir
        (default rank_N.log); popen(cmd, env, die_with_parent): another way to start it (spawn's fork
        server), which returns a Popen-like process in its own session with piped stdout and stderr, or None."""
        log_name = log_name or f"rank_{rank}.log"
        log = open(os.path.join(self.log_dir, log_name), "wb") if self.log_dir else None
        proc = popen(cmd, env, _die_with_parent) if popen is not None else None
        if proc is None:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_die_with_parent)
        self.ranks.append(Rank(rank, proc, log, name))

    def start_streaming(self):
        """Begin copying output; call after every start() so no thread runs during a fork."""
        for r in self.ranks:
            for stream, pipe in (("stdout", r.proc.stdout), ("stderr", r.proc.stderr)):
                t = threading.Thread(target=self._pump, args=(r, stream, pipe), daemon=True)
                t.start()
                r.threads.append(t)

    def _pump(self, r, stream, pipe):
        raw = r.rank in self.raw_ranks
        partial = b""
        while True:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            if r.log:
                r.log.write(chunk)
                r.log.flush()
            if raw:
                shown = self._before_traceback(r, chunk) if stream == "stderr" and self.hold_tracebacks else chunk
                text = shown.decode(errors="replace")
                with self._write_lock:
                    if text:
                        self.write(r.rank, stream, text)
                    tail = text.rsplit("\n", 1)[-1]  # a progress bar ('\r...') is no line to wait for
                    self._raw_mid_line[stream] = bool(tail) and "\r" not in tail
                    self._write_lock.notify_all()
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            self._emit(r, stream, lines, raw)
        if partial:
            self._emit(r, stream, [partial], raw)
        pipe.close()

    def _before_traceback(self, r, chunk):
        """What of a raw rank's stderr chunk goes to the console: all of it, or the part before a
        traceback starts (_emit holds the rest)."""
        if r.held_at is not None:
            return b""
        at = chunk.find(_TRACEBACK)
        while at > 0 and chunk[at - 1:at] != b"\n":
            at = chunk.find(_TRACEBACK, at + 1)
        if at < 0:
            return chunk
        r.held_at = time.monotonic()  # before the line is whole: the next chunks are held too
        return chunk[:at]

    def _emit(self, r, stream, lines, raw):
        text = [line.decode(errors="replace") for line in lines]
        if stream == "stderr":
            r.stderr_tail.extend(text)
            if self.hold_tracebacks:
                with self._write_lock:  # release_held swaps r.held from the waiting thread
                    text = self._hold(r, text)
        if not raw and text:
            with self._write_lock:  # inside a raw rank's line (print writes text, then "\n"): let it end
                self._write_lock.wait_for(lambda: not self._raw_mid_line[stream], timeout=_LINE_WAIT)
                self.write(r.rank, stream, "".join(f"[{r.name}] {t}\n" for t in text))

    def _hold(self, r, text):
        """The lines of `text` to print now; a traceback and what follows it are held in r.held."""
        if r.held:
            r.held += text
            return []
        for i, line in enumerate(text):
            if line.startswith(_TRACEBACK_TEXT):
                r.held_at = r.held_at or time.monotonic()
                r.held += text[i:]
                return text[:i]
        return text

    def release_held(self, r, older_than=None):
        """Print r's held lines as they would have been printed, and stop holding (only when held
        for more than `older_than` seconds, if given)."""
        with self._write_lock:
            if not r.held or older_than is not None and time.monotonic() - r.held_at <= older_than:
                return
            lines, r.held, r.held_at = r.held, [], None
            prefix = "" if r.rank in self.raw_ranks else f"[{r.name}] "
            self.write(r.rank, "stderr", "".join(f"{prefix}{t}\n" for t in lines))

    def _release_stale(self):
        """A traceback held HOLD_SECONDS in a process that goes on was handled: let it through."""
        for r in self.ranks:
            if r.held and r.proc.poll() is None:
                self.release_held(r, older_than=HOLD_SECONDS)

    def wait(self, timeout=None, stop=None, poll=0.01, remote_failure=None, on_exit=None):
        """Wait until all ranks exit or one fails; `stop()` returning a signal number ends it too.
        on_exit(rank, text) hears of each rank that ended ("exited with code 0", ...) once."""
        deadline = None if timeout is None else time.monotonic() + timeout
        next_remote = 0.0
        heard = set()
        while True:
            alive = False
            for r in self.ranks:
                code = r.proc.poll()
                if code is not None and on_exit is not None and r.rank not in heard:
                    heard.add(r.rank)
                    on_exit(r.rank, describe_exit(code))
                if code is None:
                    alive = True
                elif code != 0:
                    return Outcome(failed=r)
            if not alive:
                return Outcome()
            if self.hold_tracebacks:
                self._release_stale()
            signum = stop() if stop else None
            if signum:
                return Outcome(signum=signum)
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome(timed_out=True)
            if remote_failure and time.monotonic() >= next_remote:
                next_remote = time.monotonic() + 0.5
                if remote_failure():
                    return Outcome(remote=True)
            time.sleep(poll)

    def terminate(self, grace=5.0, signum=signal.SIGTERM):
        """Signal every live rank's process group, SIGKILL what is left after `grace` seconds."""
        for r in self.ranks:
            if r.proc.poll() is None:
                _killpg(r.proc.pid, signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(r.proc.poll() is None for r in self.ranks):
            time.sleep(0.01)
        self.reap()

    def reap(self):
        """SIGKILL every rank's process group (leftover children too) and collect the ranks."""
        for r in self.ranks:
            _killpg(r.proc.pid, signal.SIGKILL)
        for r in self.ranks:
            r.proc.wait()
            for t in r.threads:
                t.join(timeout=2.0)
            if r.log:
                r.log.close()


def _killpg(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def remove_shared_memory(job_id):
    """Remove segments a crashed rank left in /dev/shm (live ones are unlinked already)."""
    for path in glob.glob(f"/dev/shm/gt_{job_id}_*"):
        try:
            os.unlink(path)
        except OSError:
            pass


def console_write(rank, stream, text):
    """Write rank output to this process's stdout/stderr (what the launcher does)."""
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.write(text)
    out.flush()
