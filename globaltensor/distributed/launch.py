"""python -m globaltensor.distributed.launch: start one process per rank and supervise them.

Sets torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK,
MASTER_ADDR, MASTER_PORT) for each rank, and Paddle's (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
PADDLE_CURRENT_ENDPOINT, PADDLE_TRAINER_ENDPOINTS: names only, nothing listens there). On the first failure every other rank is stopped
(SIGTERM, then SIGKILL after the grace period), the failing rank and its last stderr lines
are printed, and the launcher exits with that rank's code. No rank outlives the launcher.
"""
import argparse
import hashlib
import os
import signal
import sys
import time

from . import mpi_backend
from ._procs import Supervisor, console_write, describe_exit, exit_code, remove_shared_memory
from .store import StoreClient, StoreError, StoreServer, left_key, new_secret

_TAG = "[globaltensor.launch]"


def _flag(parser, name, **kwargs):
    """Add --a_b with its --a-b spelling."""
    parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, **kwargs)


def parse_before_script(parser, argv):
    """Parse the launcher's options from the words before the script only: the script's own arguments go to it
    untouched (`--work` is no abbreviation of `--workers` there, `--rank 3` is the script's), as torchrun's."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            argv = argv[:i] + argv[i + 1:]
            break
        if not word.startswith("-") or word == "-":
            break
        if "=" in word:
            i += 1
            continue
        actions = parser._option_string_actions  # argparse's own table: which options take a value
        action = actions.get(word)
        if action is None:
            matches = {a for name, a in actions.items() if name.startswith(word)}
            action = matches.pop() if len(matches) == 1 else None
        i += 1 if action is not None and action.nargs == 0 else 2
    args = parser.parse_args(argv[:i + 1])
    args.script_args = list(argv[i + 1:])
    return args


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m globaltensor.distributed.launch",
        description="Start N processes per node running the same script (SPMD), with torchrun's "
                    "environment variables, and stop them all if one fails.")
    _flag(p, "nproc_per_node", type=int, default=1, help="processes (ranks) to start on this node (default 1)")
    _flag(p, "nnodes", type=int, default=1, help="number of nodes in the job (default 1)")
    _flag(p, "node_rank", type=int, default=0, help="this node's index in [0, nnodes) (default 0)")
    _flag(p, "master_addr", default="127.0.0.1",
          help="address of node 0, which hosts the rendezvous store (default 127.0.0.1)")
    _flag(p, "master_port", type=int, default=0,
          help="port of the rendezvous store; default a free port (required when nnodes > 1)")
    _flag(p, "log_dir", default=None, help="write each rank's output to DIR/rank_N.log as well")
    _flag(p, "grace_period", type=float, default=5.0,
          help="seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module (python -m)")
    p.add_argument("script", help="the Python script (or module, with -m) every rank runs")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    args = parse_before_script(p, sys.argv[1:] if argv is None else list(argv))
    if args.nproc_per_node < 1 or args.nnodes < 1:
        p.error("--nproc_per_node and --nnodes must be at least 1")
    if not 0 <= args.node_rank < args.nnodes:
        p.error(f"--node_rank must be in [0, {args.nnodes}), got {args.node_rank}")
    if args.nnodes > 1 and not args.master_port:
        p.error("--master_port is required when --nnodes > 1 (every node must name the same port)")
    if args.nnodes > 1 and not os.environ.get("GLOBALTENSOR_SECRET"):
        p.error("set GLOBALTENSOR_SECRET to the same hex string on every node when --nnodes > 1 "
                "(e.g. `export GLOBALTENSOR_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))')`)")
    return args


def rank_environment(args, local_rank, port, secret, job_id):
    world_size = args.nnodes * args.nproc_per_node
    rank = args.node_rank * args.nproc_per_node + local_rank
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(local_rank),
               WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(args.nproc_per_node),
               NODE_RANK=str(args.node_rank), GROUP_RANK=str(args.node_rank), MASTER_ADDR=args.master_addr,
               MASTER_PORT=str(port), GLOBALTENSOR_SECRET=secret, GLOBALTENSOR_STORE_HOSTED="1",
               GLOBALTENSOR_JOB_ID=job_id, GLOBALTENSOR_NNODES=str(args.nnodes))
    # Paddle's names for the same facts
    endpoints = [f"{args.master_addr}:{port + 1 + r}" for r in range(world_size)]
    env.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(world_size), PADDLE_RANK_IN_NODE=str(local_rank),
               PADDLE_LOCAL_SIZE=str(args.nproc_per_node), PADDLE_CURRENT_ENDPOINT=endpoints[rank],
               PADDLE_TRAINER_ENDPOINTS=",".join(endpoints))
    env.setdefault("PYTHONUNBUFFERED", "1")
    if args.nproc_per_node > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _host_store(args, secret):
    """Node 0 hosts the store; it binds master_addr when that is local, else every interface."""
    try:
        return StoreServer(args.master_addr, args.master_port, bytes.fromhex(secret), start=False)
    except OSError:
        return StoreServer("", args.master_port, bytes.fromhex(secret), start=False)


class _Signals:
    """Remembers SIGINT/SIGTERM sent to the launcher so the wait loop can stop the ranks."""

    def __init__(self):
        self.received = None
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        self.received = self.received or signum

    def __call__(self):
        return self.received


def _report_failure(failed, others="ranks"):
    """The root cause, once: its traceback (held back from the console), else its last stderr
    lines. Returns its exception's lines (to tell the other ranks' from it)."""
    for t in failed.threads:  # its pipes close as it exits: read them to the end
        t.join(timeout=2.0)
    root = failed.held_exception()
    shown = failed.held or list(failed.stderr_tail)
    what = "Its traceback" if failed.held else "Its last stderr lines"
    lines = "\n".join(f"  {line}" for line in shown if line or failed.held) or "  (no output on stderr)"
    failed.held, failed.held_at = [], None
    sys.stderr.write(f"{_TAG} {failed.name} (pid {failed.proc.pid}) {describe_exit(failed.proc.returncode)}: "
                     f"first failure, stopping the other {others}. {what}:\n{lines}\n")
    sys.stderr.flush()
    return root


def _report_others(sup, failed, root):
    """After teardown, each other rank that raised: its exception without the frames, one line
    when its first line is the root cause's (the same error on every rank); a held traceback of a
    rank that ended well in full."""
    for r in sup.ranks:
        if r is failed or not r.held:
            continue
        if r.proc.returncode == 0:
            sup.release_held(r)
            continue
        lines = r.held_exception()
        shown = lines[:1] if lines[:1] == root[:1] else lines
        sys.stderr.write("".join(f"[{r.name}] {line}\n" for line in shown))
        r.held = []
    sys.stderr.flush()


def main(argv=None):
    args = parse_args(argv)
    secret = os.environ.get("GLOBALTENSOR_SECRET") or new_secret()
    server = _host_store(args, secret) if args.node_rank == 0 else None
    port = server.port if server else args.master_port
    job_id = os.environ.get("GLOBALTENSOR_JOB_ID") or (
        hashlib.sha256(f"{secret}|{args.master_addr}|{port}".encode()).hexdigest()[:12])
    target = ["-m", args.script] if args.module else [args.script]
    # across nodes each rank runs under `mpiexec -n 1`, so the ranks can join one MPI communicator
    wrap = mpi_backend.rank_prefix() if args.nnodes > 1 else []
    sup = Supervisor(console_write, log_dir=args.log_dir, raw_ranks={0}, hold_tracebacks=True)
    signals = _Signals()
    for local_rank in range(args.nproc_per_node):
        sup.start(args.node_rank * args.nproc_per_node + local_rank, [*wrap, sys.executable, "-u", *target, *args.script_args],
                  rank_environment(args, local_rank, port, secret, job_id))
    if server:
        server.start()
    sup.start_streaming()
    store = _connect(args, port, secret) if args.nnodes > 1 else None
    remote = (lambda: _remote_failed(store, args.node_rank)) if store else None
    try:
        outcome = sup.wait(stop=signals, remote_failure=remote, on_exit=_publish_exit(server, store))
        root = []
        if outcome.failed:
            root = _report_failure(outcome.failed)
            _publish_failure(store, outcome.failed, args.nnodes if server else 0)
        if not outcome.ok:
            forward = outcome.signum if outcome.signum == signal.SIGINT else signal.SIGTERM
            sup.terminate(grace=args.grace_period, signum=forward)
        else:
            sup.reap()
        _report_others(sup, outcome.failed, root)
    finally:
        if server:
            server.close()
        remove_shared_memory(job_id)
    if outcome.failed:
        failed = outcome.failed
        sys.stderr.write(f"{_TAG} job failed: rank {failed.rank} {describe_exit(failed.proc.returncode)} "
                         f"(root cause); exit code {exit_code(failed.proc.returncode)}\n")
        return exit_code(failed.proc.returncode)
    if outcome.remote:
        return 1
    if outcome.signum:
        sys.stderr.write(f"{_TAG} stopped by {signal.Signals(outcome.signum).name}; all ranks were stopped\n")
        return 128 + int(outcome.signum)
    return 0


def _connect(args, port, secret):
    try:
        return StoreClient(args.master_addr, port, bytes.fromhex(secret), timeout=60.0)
    except StoreError as exc:
        sys.stderr.write(f"{_TAG} warning: cannot watch other nodes for failures: {exc}\n")
        return None


def _publish_exit(server, store):
    """Tell the ranks still waiting for a rank that it has ended (under its own word, when it left one)."""
    def publish(rank, how):
        try:
            if server is not None:
                server.set_if_absent(left_key(rank), how.encode())
            elif store is not None and not store.check([left_key(rank)])[0]:
                store.set(left_key(rank), how.encode())
        except (OSError, ConnectionError, StoreError):
            pass
    return publish


def _publish_failure(store, failed, nnodes):
    """Tell the other nodes; the node hosting the store keeps it up until they have heard (3 s at most)."""
    if not store:
        return
    try:
        store.set("launch/failed", f"{failed.rank}:{exit_code(failed.proc.returncode)}".encode())
        deadline = time.monotonic() + 3.0
        for node in range(1, nnodes):
            store.get(f"launch/ack/{node}", max(0.0, deadline - time.monotonic()))
    except (OSError, ConnectionError, StoreError):
        pass


def _remote_failed(store, node_rank):
    """True when another node reported a failed rank (a vanished store counts as nothing)."""
    try:
        if not store.check(["launch/failed"])[0]:
            return False
        who = store.get("launch/failed", 1.0).decode()
        store.set(f"launch/ack/{node_rank}", b"1")
    except (OSError, ConnectionError, StoreError):
        return False
    sys.stderr.write(f"{_TAG} rank {who.split(':')[0]} on another node failed; stopped this node's ranks\n")
    return True


if __name__ == "__main__":
    sys.exit(main())
