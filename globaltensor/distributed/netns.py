"""Two "hosts" on one machine for tests: network namespaces joined by a veth pair, each with its own /dev/shm.

Each host is a network namespace holding one end of a veth pair with a link-local address
(169.254.X.1 and .2: never a private or public range), plus its own tmpfs that every command
run there sees as /dev/shm (a mount namespace per command, bind-mounting the host's tmpfs) and its
own hostname (a UTS namespace), so ranks on different hosts share no memory and reach each other
only over the veth. Needs root, iproute2 and util-linux's unshare.

    with TwoHosts() as hosts:
        procs = [hosts.popen(i, [sys.executable, "-m", "globaltensor.distributed.launch", ...]) for i in (0, 1)]

Everything made is removed on every exit path: the context manager's exit, atexit, SIGTERM/SIGINT/
SIGHUP, and a sweep of the leftovers of runs whose process is gone. Names carry this process's pid
and a counter, so runs in parallel do not collide.
"""
import atexit
import functools
import itertools
import os
import shutil
import signal
import subprocess
import threading

PREFIX = "gtmn"  # every namespace, link and tmpfs this module makes starts with it
RUN_DIR = "/run/globaltensor-netns"
_counter = itertools.count()
_live = {}  # tag -> TwoHosts, for atexit and the signal handlers
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def available():
    """(True, "") where two hosts can be made here, else (False, why); a container without the
    capability to make namespaces says so here (one `unshare` probe), not halfway through a test."""
    if os.geteuid() != 0:
        return False, "network and mount namespaces need root"
    for tool in ("ip", "unshare", "mount", "umount"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` is not installed"
    probe = subprocess.run(["unshare", "--net", "--mount", "--uts", "true"], capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0:
        return False, f"cannot make namespaces here: {probe.stderr.strip()[:200]}"
    return True, ""


def _run(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=check)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale():
    """Delete the namespaces and tmpfs mounts of earlier runs whose process is gone (names end in -<pid>-<n>)."""
    listed = _run("ip", "netns", "list", check=False).stdout.split()
    for name in listed:
        if name.startswith(PREFIX) and name.count("-") >= 3:
            pid = name.split("-")[1]
            if pid.isdigit() and not _pid_alive(int(pid)):
                _run("ip", "netns", "del", name, check=False)
    if os.path.isdir(RUN_DIR):
        for tag in os.listdir(RUN_DIR):
            pid = tag.split("-")[1] if tag.count("-") >= 2 else ""
            if pid.isdigit() and not _pid_alive(int(pid)):
                _remove_dirs(os.path.join(RUN_DIR, tag))


def _remove_dirs(root):
    for host in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        _run("umount", "-l", os.path.join(root, host), check=False)
        try:
            os.rmdir(os.path.join(root, host))
        except OSError:
            pass
    try:
        os.rmdir(root)
    except OSError:
        pass


class TwoHosts:
    """Two hosts 0 and 1; `addrs[i]` is host i's address, `names[i]` its hostname."""

    def __init__(self, shm_bytes=1 << 30):
        ok, why = available()
        if not ok:
            raise RuntimeError(f"TwoHosts: {why}")
        n = next(_counter)
        self.tag = f"{PREFIX}-{os.getpid()}-{n}"
        self.namespaces = [f"{self.tag}-a", f"{self.tag}-b"]
        short = f"{PREFIX}{os.getpid() % 100000}{n % 100}"  # link names are at most 15 characters
        self.links = self._veths = [f"{short}a", f"{short}b"]  # each host's network interface (GLOO_SOCKET_IFNAME)
        third = 1 + (os.getpid() * 7 + n) % 254
        self.addrs = [f"169.254.{third}.1", f"169.254.{third}.2"]
        self.names = ["gt-host-a", "gt-host-b"]
        self._shm_dirs = [os.path.join(RUN_DIR, self.tag, h) for h in ("a", "b")]
        self._shm_bytes = int(shm_bytes)
        self._procs = []
        self._made = False

    def __enter__(self):
        _install_handlers()
        sweep_stale()
        with _lock:
            _live[self.tag] = self
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _make(self):
        self._made = True
        for ns in self.namespaces:
            _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", self._veths[0], "type", "veth", "peer", "name", self._veths[1])
        for ns, veth, addr in zip(self.namespaces, self._veths, self.addrs):
            _run("ip", "link", "set", veth, "netns", ns)
            _run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", veth)
            _run("ip", "-n", ns, "link", "set", veth, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        for d in self._shm_dirs:
            os.makedirs(d, exist_ok=True)
            _run("mount", "-t", "tmpfs", "-o", f"size={self._shm_bytes},mode=1777", self.tag, d)

    def command(self, host, cmd):
        """argv that runs `cmd` on host `host` (0 or 1): its network, its /dev/shm, its hostname."""
        script = 'mount --make-rprivate / && mount --bind "$0" /dev/shm && hostname "$1" && shift && exec "$@"'
        return ["ip", "netns", "exec", self.namespaces[host], "unshare", "--mount", "--uts", "--",
                "sh", "-c", script, self._shm_dirs[host], self.names[host], *cmd]

    def popen(self, host, cmd, **kwargs):
        """subprocess.Popen of `cmd` on host `host`, in its own process group; killed at close()."""
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(self.command(host, cmd), **kwargs)
        self._procs.append(proc)
        return proc

    def run(self, host, cmd, timeout=60, **kwargs):
        """subprocess.run of `cmd` on host `host` with a hard timeout."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(host, cmd), timeout=timeout, **kwargs)

    def close(self):
        """Kill what popen started, delete the namespaces (and with them the veth), unmount the tmpfs."""
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self._procs = []
        if self._made:
            for ns in self.namespaces:
                _run("ip", "netns", "del", ns, check=False)
            _remove_dirs(os.path.join(RUN_DIR, self.tag))
            self._made = False
        with _lock:
            _live.pop(self.tag, None)


def _close_all():
    for hosts in list(_live.values()):
        hosts.close()


_installed = []


def _install_handlers():
    """atexit and SIGTERM/SIGINT/SIGHUP close every live TwoHosts (handlers set on first use, main thread only)."""
    if _installed:
        return
    _installed.append(True)
    atexit.register(_close_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        previous = signal.getsignal(signum)

        def handler(s, frame, previous=previous):
            _close_all()
            if callable(previous):
                previous(s, frame)
            else:
                signal.signal(s, signal.SIG_DFL)
                os.kill(os.getpid(), s)
        signal.signal(signum, handler)
