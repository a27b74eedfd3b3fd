"""Run one launched job under watch: its process tree's peak RSS by role, a hard timeout, nothing left behind."""
import os
import signal
import subprocess
import time


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _start_time(pid):
    """The process's start time in clock ticks (field 22 of /proc/pid/stat): tells a pid's reuse apart."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw.rsplit(b")", 1)[1].split()
    return int(fields[19])


def alive(pid, start):
    """Whether the process `pid` that started at `start` still runs (a zombie does not)."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return False
    fields = raw.rsplit(b")", 1)[1].split()
    return fields[0] != b"Z" and int(fields[19]) == start


def _children_map():
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        raw = _read(f"/proc/{name}/stat")
        if raw is None:
            continue
        ppid = int(raw.rsplit(b")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def descendants(root):
    """Every live process below `root` (not root itself)."""
    kids, out, todo = _children_map(), [], [root]
    while todo:
        for child in kids.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def vmhwm_kb(pid):
    """Peak resident set size of a live process in KiB (VmHWM), or None once it is gone."""
    raw = _read(f"/proc/{pid}/status")
    for line in (raw or b"").splitlines():
        if line.startswith(b"VmHWM:"):
            return int(line.split()[1])
    return None


def environ_value(pid, key):
    """The value of `key` in a live process's environment (str), or None."""
    raw = _read(f"/proc/{pid}/environ") or b""
    prefix = key.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def role_of(pid):
    """'server' / 'trainer' from Paddle's environment contract (TRAINING_ROLE), else None."""
    value = environ_value(pid, "TRAINING_ROLE")
    if value is None:
        return None
    return {"PSERVER": "server", "TRAINER": "trainer"}.get(value.upper(), value.lower())


class Watched:
    """A job started in its own session, polled for the peak RSS of each process below it."""

    def __init__(self, cmd, cwd, env, log_path, default_role=None):
        self.t0 = time.time()
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.default_role = default_role  # the role of the launched process itself (one-process runs)
        self.seen = {}  # pid -> [start_time, role, peak KiB]

    def poll(self):
        pids = descendants(self.proc.pid)
        if self.default_role:
            pids.append(self.proc.pid)
        for pid in pids:
            hwm = vmhwm_kb(pid)
            if hwm is None:
                continue
            entry = self.seen.get(pid)
            if entry is None or entry[0] != _start_time(pid):
                entry = self.seen[pid] = [_start_time(pid), role_of(pid) or (
                    self.default_role if pid == self.proc.pid else None), 0]
            elif entry[1] is None:  # seen between fork and exec (the parent's environment): read it again
                entry[1] = role_of(pid)
            entry[2] = max(entry[2], hwm)
        return self.proc.poll()

    def wait(self, timeout, done=lambda: False, grace=30.0, interval=0.5):
        """Poll until the job exits, `timeout` seconds pass, or `grace` seconds after done() first holds.
        Returns (exit code or None, why it ended: 'exited' | 'timeout' | 'stuck after results')."""
        deadline, done_at = self.t0 + timeout, None
        while True:
            rc = self.poll()
            if rc is not None:
                return rc, "exited"
            now = time.time()
            if now > deadline:
                return None, "timeout"
            if done_at is None and done():
                done_at = now
            if done_at is not None and now - done_at > grace:
                return None, "stuck after results"
            time.sleep(interval)

    def peak_mb(self, role):
        peaks = [kb for _, r, kb in self.seen.values() if r == role]
        return round(max(peaks) / 1024, 1) if peaks else None

    def kill(self):
        """SIGTERM the job's session, then SIGKILL it and every process seen below it that still lives."""
        for sig, pause in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for pid, (start, _, _) in self.seen.items():
                if pid != self.proc.pid and alive(pid, start):
                    try:
                        os.kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            end = time.time() + pause
            while time.time() < end and self.proc.poll() is None:
                time.sleep(0.1)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        end = time.time() + 5.0  # the killed take a moment to go: wait (bounded) until none runs
        while time.time() < end and any(alive(pid, start) for pid, (start, _, _) in self.seen.items()):
            time.sleep(0.05)
        self._log.close()
