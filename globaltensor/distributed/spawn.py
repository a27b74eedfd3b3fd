"""spawn(fn, args, nprocs): run fn(*args) in fresh rank processes, for notebooks and tests."""
import os
import pickle
import signal
import sys
import tempfile

from . import _fork_server
from ._procs import Supervisor, describe_exit, exit_code, remove_shared_memory
from .store import StoreServer, left_key, new_secret


class SpawnError(RuntimeError):
    """A rank of a spawned job failed (its traceback is in the message) or the job timed out."""

    def __init__(self, message, rank=None, exit_code=None):
        super().__init__(message)
        self.rank, self.exit_code = rank, exit_code


def _notebook_write(rank, stream, text):
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.write(text)
    out.flush()


def rank_env(rank, nprocs, port, secret, job_id, extra=None):
    """The launcher's environment contract for one rank of a single-node job."""
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
               NODE_RANK="0", GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GLOBALTENSOR_SECRET=secret, GLOBALTENSOR_STORE_HOSTED="1", GLOBALTENSOR_JOB_ID=job_id,
               GLOBALTENSOR_NNODES="1", PYTHONUNBUFFERED="1")
    if nprocs > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def spawn(fn, args=(), nprocs=2, timeout=None, env=None, grace=3.0):
    """Run fn(*args) in nprocs fresh processes (ranks 0..nprocs-1) and return their results.

    Each process gets RANK, WORLD_SIZE, ... as under the launcher, so gt.env and the
    collectives work. Output is streamed with a `[rank N]` prefix. If a rank raises or dies,
    the others are stopped and SpawnError carries that rank's traceback; after `timeout`
    seconds every rank is stopped and SpawnError names those still running.
    """
    if int(nprocs) < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    popen = _fork_server.popen if _fork_server.enabled(env) else None  # docs/testing.md, "The fork server"
    secret = new_secret()
    server = StoreServer("127.0.0.1", 0, bytes.fromhex(secret), start=False)
    job_id = os.urandom(6).hex()
    with tempfile.TemporaryDirectory(prefix="gt-spawn-") as tmp:
        payload = os.path.join(tmp, "payload.pkl")
        import cloudpickle  # here, not at import: every rank and trainer imports this module, few call spawn
        with open(payload, "wb") as f:
            pickle.dump((list(sys.path), cloudpickle.dumps((fn, tuple(args)))), f)
        sup = Supervisor(_notebook_write)
        for rank in range(nprocs):
            cmd = [sys.executable, "-m", "globaltensor.distributed._spawn_child", payload,
                   os.path.join(tmp, f"result_{rank}.pkl")]
            sup.start(rank, cmd, rank_env(rank, nprocs, server.port, secret, job_id, env), popen=popen)
        server.start()
        sup.start_streaming()
        try:
            outcome = sup.wait(timeout=timeout, on_exit=lambda rank, how: server.set_if_absent(left_key(rank),
                                                                                                how.encode()))
            if outcome.ok:
                sup.reap()
                return [_value(_load(os.path.join(tmp, f"result_{r}.pkl"))) for r in range(nprocs)]
            sup.terminate(grace=grace, signum=signal.SIGTERM)
        except BaseException:  # KeyboardInterrupt in a notebook: stop every rank, then re-raise
            sup.terminate(grace=grace, signum=signal.SIGTERM)
            raise
        finally:
            server.close()
            remove_shared_memory(job_id)
        if outcome.timed_out:
            running = [r.rank for r in sup.ranks if r.proc.returncode is None or r.proc.returncode < 0]
            tails = "".join(f"\n--- rank {r.rank}, last stderr lines ---\n" + "\n".join(r.stderr_tail)
                            for r in sup.ranks if r.stderr_tail)
            raise SpawnError(f"spawn timed out after {timeout} s; rank(s) {running} were still running and "
                             f"were stopped{tails}")
        failed = outcome.failed
        result = _load(os.path.join(tmp, f"result_{failed.rank}.pkl"))
        detail = result[1] if result and result[0] == "error" else "\n".join(failed.stderr_tail)
        raise SpawnError(f"rank {failed.rank} {describe_exit(failed.proc.returncode)}; the other ranks were "
                         f"stopped. Its traceback:\n{detail}", rank=failed.rank,
                         exit_code=exit_code(failed.proc.returncode))


def _value(record):
    """A rank's return value; None for a rank that exited 0 without returning (os._exit)."""
    return record[1] if record else None


def _load(path):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError):
        return None
