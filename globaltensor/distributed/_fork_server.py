"""spawn's fork server: rank processes forked from one that has imported numpy and globaltensor already.

A fresh rank costs a Python start, `import globaltensor` and the teardown at exit (~0.4 s of CPU each, twice
per 2-rank spawn); a forked one costs a fork. A server is started per environment (the ranks' one less
UNREAD, the per-job keys no import reads, so whatever an import reads is what a fresh process would have
read: GLOBALTENSOR_*, OMP_NUM_THREADS for OpenBLAS, ...) and lives as long as the process that called
spawn (PR_SET_PDEATHSIG). Each child, before running anything of the caller's: its own session, stdio,
cwd and full environment, numpy's global RandomState reseeded, and the job joined as `import globaltensor`
would have joined it (WORLD_SIZE > 1). Then it runs _spawn_child.main and exits (exit_now).
GLOBALTENSOR_SPAWN_PRELOAD=torch adds torch to the preload; GLOBALTENSOR_SPAWN_FORKSERVER=0 turns
the server off; docs/testing.md, "The fork server".
"""
import array
import atexit
import contextlib
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback

# what spawn sets per job or per rank; of these an import reads WORLD_SIZE only, whose join _become_child
# replays (tests/distributed/test_fork_server.py checks it)
JOB_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT", "GLOBALTENSOR_SECRET",
            "GLOBALTENSOR_JOB_ID")
# ... and variables that change between calls but no import reads: pytest's name of the running test
UNREAD = JOB_KEYS + ("PYTEST_CURRENT_TEST",)
# Two servers per environment, the ranks of a job forked from each in turn (rank 0 from either): a fork
# keeps its server's hash seed (str hashes, set order), so neighbouring ranks of a job differ in it, and a
# rank from one job to the next, as fresh processes do: a set order that differs shows in tests.
SEEDS = 2
MAX_SERVERS = 4 * SEEDS  # the oldest is stopped beyond this
_MAX_REQUEST = 1 << 20
_INT = struct.Struct("i")


PRELOADABLE = ("torch",)  # what GLOBALTENSOR_SPAWN_PRELOAD may name


def _preload(env):
    return [name.strip() for name in env.get("GLOBALTENSOR_SPAWN_PRELOAD", "").split(",") if name.strip()]


def enabled(env=None):
    """Whether spawn forks its ranks from a server (not under mpirun, whose variables an import reads);
    env: spawn's env= (GLOBALTENSOR_SPAWN_FORKSERVER=0 there too starts fresh processes). A GLOBALTENSOR_SPAWN_PRELOAD naming something else than PRELOADABLE raises here."""
    env = {**os.environ, **(env or {})}
    unknown = [name for name in _preload(env) if name not in PRELOADABLE]
    if unknown:
        raise ValueError(f"GLOBALTENSOR_SPAWN_PRELOAD names {unknown}; it may name {list(PRELOADABLE)}")
    if env.get("GLOBALTENSOR_SPAWN_FORKSERVER", "1").lower() in ("0", "false", "no", "off"):
        return False
    from .. import env
    return env._mpi_launcher_env() is None


class ForkedProcess:
    """The part of subprocess.Popen that Supervisor uses, for a child of the fork server."""

    def __init__(self, pid, reply, stdout, stderr):
        self.pid, self._reply, self.stdout, self.stderr = pid, reply, stdout, stderr
        self.returncode = None

    def poll(self):
        return self.wait(timeout=0)

    def wait(self, timeout=None):
        if self.returncode is None:
            self._reply.settimeout(timeout)
            try:
                data = self._reply.recv(_INT.size, socket.MSG_WAITALL)
            except (BlockingIOError, socket.timeout):
                if timeout is None:
                    raise
                return None
            # the server gone (it died with its parent or was killed): so were its children (PDEATHSIG)
            self.returncode = (os.waitstatus_to_exitcode(_INT.unpack(data)[0]) if len(data) == _INT.size
                               else -signal.SIGKILL)
            self._reply.close()
        return self.returncode


class _Server:
    """One server process and the control socket to it."""

    def __init__(self, env, die_with_parent):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        self.proc = subprocess.Popen([sys.executable, "-m", "globaltensor.distributed._spawn_child",
                                      "--fork-server", str(theirs.fileno())], env=env, pass_fds=[theirs.fileno()],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=die_with_parent)
        theirs.close()

    def start(self, argv, env, stdio):
        """Fork a child running _spawn_child with argv; stdio: its stdin, stdout and stderr fds."""
        ours, theirs = socket.socketpair()
        request = repr((list(argv), dict(env), os.getcwd())).encode()
        try:
            with self.lock:
                self.control.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                  array.array("i", [theirs.fileno(), *stdio]))])
        finally:
            theirs.close()
        ours.settimeout(120.0)  # the first request waits for the server's imports
        data = ours.recv(_INT.size, socket.MSG_WAITALL)
        if len(data) != _INT.size:
            ours.close()
            raise OSError("the fork server ended before starting the rank")
        return _INT.unpack(data)[0], ours

    def close(self):
        """Stop the server (its children, if any are left, die with it)."""
        self.control.close()
        self.proc.kill()
        self.proc.wait()


_servers = {}  # (environment less UNREAD, rank % SEEDS) -> _Server, oldest first
_servers_lock = threading.Lock()


def popen(cmd, env, die_with_parent):
    """Start `cmd` (python -m globaltensor.distributed._spawn_child PAYLOAD RESULT) forked from the server
    for `env`; returns a ForkedProcess whose stdout and stderr are pipes, as Popen(stdout=PIPE, ...), or None
    (start it as a fresh process) where no server runs for `env` and this is not the main thread: a server
    dies with the thread that started it (PR_SET_PDEATHSIG)."""
    env_key = tuple(sorted((k, v) for k, v in env.items() if k not in UNREAD))
    # which rank gets which server changes from job to job (the job id is random), as a fresh rank's seed does
    turn = int(env.get("GLOBALTENSOR_JOB_ID", "0") or "0", 16)
    key = (env_key, (int(env.get("RANK", "0")) + turn) % SEEDS)
    with _servers_lock:
        server = _servers.pop(key, None)  # put back last: the least recently used goes first
        if server is not None and server.proc.poll() is not None:
            server = None
        if server is None:
            if threading.current_thread() is not threading.main_thread():
                return None
            atexit.unregister(_close_all)
            atexit.register(_close_all)  # once, however many servers
            for slot in range(SEEDS):  # all of an environment's together: their imports overlap
                if slot != key[1] and (env_key, slot) not in _servers:
                    _servers[env_key, slot] = _Server(dict(env_key), die_with_parent)
            server = _Server(dict(env_key), die_with_parent)
        _servers[key] = server
        while len(_servers) > MAX_SERVERS:
            _servers.pop(next(iter(_servers))).close()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY)
    try:
        pid, reply = server.start(cmd[3:], env, [stdin, out_w, err_w])
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        for fd in (stdin, out_w, err_w):
            os.close(fd)
    return ForkedProcess(pid, reply, os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0))


def _close_all():
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()
        atexit.unregister(_close_all)


# ---- the server process ----

def _serve(control_fd):
    """Fork a child per request until the control socket closes; returns (in the child only) its request."""
    # the preload: `python -m globaltensor.distributed._spawn_child` has imported the package (numpy with it)
    import cloudpickle  # noqa: F401
    if "torch" in _preload(os.environ):
        try:
            import torch  # noqa: F401
        except ImportError:
            pass  # a rank that imports it raises there, as a fresh one would
    import gc
    gc.freeze()  # the preloaded objects: a child's collections leave their pages shared
    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    replies = {}  # pid -> the socket its exit status goes to
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is control:
                fds = array.array("i")
                data, ancdata, _, _ = control.recvmsg(_MAX_REQUEST, socket.CMSG_SPACE(4 * fds.itemsize))
                if not data:
                    return None  # the parent closed it, or is gone
                for level, kind, cdata in ancdata:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
                reply, stdio = socket.socket(fileno=fds[0]), list(fds[1:])
                server_pid = os.getpid()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for s in (control, reply, *replies.values()):
                        s.close()
                    sel.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    return data, stdio, server_pid
                for fd in stdio:
                    os.close(fd)
                replies[pid] = reply
                reply.sendall(_INT.pack(pid))
            else:
                while os.read(wake_r, 4096) == 4096:
                    pass
                _reap(replies)


def _reap(replies):
    while replies:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = replies.pop(pid, None)
        if reply is not None:
            try:
                reply.sendall(_INT.pack(status))
            except OSError:
                pass  # its spawn is gone
            reply.close()


def _become_child(data, stdio, server_pid):
    """Set this forked process up as a fresh `python -m globaltensor.distributed._spawn_child` would be."""
    import ast
    argv, env, cwd = ast.literal_eval(data.decode())
    os.setsid()
    from ._procs import _die_with_parent
    _die_with_parent()
    if os.getppid() != server_pid:  # the server died before PDEATHSIG was set: no orphan
        os._exit(1)
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path[0] = cwd
    sys.argv = [os.path.join(os.path.dirname(__file__), "_spawn_child.py"), *argv]
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()  # a fresh process seeds numpy's global RandomState from the OS
    from .. import env as gt_env
    if gt_env.get_world_size() > 1:  # what `import globaltensor` does in a rank (globaltensor/_surface.py)
        from . import world
        world.world()
    return argv


@contextlib.contextmanager
def exit_now():
    """End a forked child as the interpreter ends a process, less the teardown of every module and object
    (a fork's teardown writes to each page it shares with the server: ~0.3 s): its non-daemon threads
    joined, atexit's functions run, stdout and stderr flushed, then os._exit with the code."""
    code = 0
    try:
        yield
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        getattr(threading, "_shutdown", lambda: None)()  # what the interpreter calls first at exit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)


def serve(control_fd):
    """The server's main (`python -m globaltensor.distributed._spawn_child --fork-server FD`): returns None
    in the server when its parent closes the control socket; in each child, the argv to run main with."""
    request = _serve(control_fd)
    return None if request is None else _become_child(*request)
