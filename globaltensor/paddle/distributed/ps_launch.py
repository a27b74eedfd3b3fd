"""A parameter-server job's processes on this host: Paddle's PS environment contract and one supervisor.

`python -m globaltensor.paddle.distributed.launch --server_num=S --worker_num=W train.py` starts S
servers and W trainers here (endpoints on 127.0.0.1, free ports). With `--servers=ip:port,...` and
`--workers=ip:port,...` (several machines: run the same command on each) this host starts the
endpoints whose ip is one of its own. Each process gets Paddle's variables (TRAINING_ROLE,
PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ENDPOINTS, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID,
POD_IP, PADDLE_PORT) plus GLOBALTENSOR_SECRET (hex: the PS engine authenticates with it) and
GLOBALTENSOR_JOB_ID. The first failure stops every other process here and gives the launcher its
exit code; servers are expected to return once every trainer has called stop_worker, and are
stopped SERVER_GRACE seconds after the last local trainer ended well (the launcher then exits 0).
"""
import hashlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from ...distributed._procs import Supervisor, console_write, describe_exit, exit_code
from ...distributed.launch import _report_failure, _report_others, _Signals

_TAG = "[globaltensor.launch]"
SERVER_GRACE = 3.0  # seconds servers have to return by themselves once every local trainer ended well
_TRAINERS_DONE = -1  # the wait's stop() answer when only servers are left
_LEFT_OVER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "GLOBALTENSOR_STORE_HOSTED", "PADDLE_RANK_IN_NODE", "PADDLE_LOCAL_SIZE")  # a collective job's


@dataclass(frozen=True)
class Process:
    """One process of the job: its role ("server" | "trainer"), index in its role's list, endpoint."""
    role: str
    index: int
    endpoint: str

    @property
    def name(self):
        return f"{self.role} {self.index}"

    @property
    def log_name(self):  # Paddle's names
        return f"{'serverlog' if self.role == 'server' else 'workerlog'}.{self.index}"


@dataclass(frozen=True)
class Plan:
    """The whole job's endpoints and the processes this host starts."""
    servers: tuple
    trainers: tuple
    local: tuple  # Process...

    @property
    def multi_host(self):
        return len(self.local) < len(self.servers) + len(self.trainers)


def wants_ps(args):
    """Paddle's rule: --run_mode=ps, or any of the server / trainer flags, makes it a PS job."""
    return args.run_mode == "ps" or any(v is not None for v in (args.server_num, args.worker_num, args.servers,
                                                                  args.workers))


def _split_endpoints(text, flag):
    endpoints = [e.strip() for e in text.split(",") if e.strip()]
    if not endpoints:
        raise ValueError(f"{flag}={text!r}: give a comma-separated list of ip:port")
    for e in endpoints:
        host, _, port = e.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{flag}: {e!r} is not ip:port (port in 1..65535)")
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"{flag}: an endpoint appears twice in {endpoints}")
    return endpoints


def is_local_address(host):
    """True when `host` is an address of this machine (binding it succeeds; nothing is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
        return True
    except OSError:
        return False


def free_endpoints(host, n):
    """n distinct free ports on host (bound together, then released for the processes to bind)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))
        return [f"{host}:{s.getsockname()[1]}" for s in socks]
    finally:
        for s in socks:
            s.close()


def _count(given, listed, flag, list_flag):
    if given is not None and given < 1:
        raise ValueError(f"{flag}={given}: a PS job needs at least 1")
    if given is not None and listed is not None and given != len(listed):
        raise ValueError(f"{flag}={given} disagrees with {list_flag}, which names {len(listed)}: {','.join(listed)}")


def plan_job(args):
    """The job's endpoints and this host's processes, from the flags; ValueError for bad flags."""
    servers = _split_endpoints(args.servers, "--servers") if args.servers is not None else None
    trainers = _split_endpoints(args.workers, "--workers") if args.workers is not None else None
    _count(args.server_num, servers, "--server_num", "--servers")
    _count(args.worker_num, trainers, "--worker_num", "--workers")
    if servers is None and trainers is not None and not all(is_local_address(e.rpartition(":")[0]) for e in trainers):
        raise ValueError("--workers names other hosts: give --servers as well (every host must agree on the servers)")
    host = "127.0.0.1"
    if servers is None:
        servers = free_endpoints(host, args.server_num or 1)
    if trainers is None:
        host = next((e.rpartition(":")[0] for e in servers if is_local_address(e.rpartition(":")[0])), host)
        trainers = free_endpoints(host, args.worker_num or 1)
    local = tuple(Process(role, i, e) for role, endpoints in (("server", servers), ("trainer", trainers))
                  for i, e in enumerate(endpoints) if is_local_address(e.rpartition(":")[0]))
    if not local:
        raise ValueError(f"no endpoint of the job is an address of this host: servers {servers}, trainers {trainers}")
    return Plan(tuple(servers), tuple(trainers), local)


def environment(plan, proc, secret, job_id, base=None):
    """The variables process `proc` runs with: Paddle's PS contract and globaltensor's secret / job id."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _LEFT_OVER}
    ip, _, port = proc.endpoint.rpartition(":")
    role = "PSERVER" if proc.role == "server" else "TRAINER"
    env.update(TRAINING_ROLE=role, PADDLE_ROLE=role, POD_IP=ip, PADDLE_PORT=port,
               PADDLE_CURRENT_ENDPOINT=proc.endpoint, PADDLE_PSERVERS_IP_PORT_LIST=",".join(plan.servers),
               PADDLE_PSERVER_ENDPOINTS=",".join(plan.servers), PADDLE_TRAINER_ENDPOINTS=",".join(plan.trainers),
               PADDLE_TRAINERS_NUM=str(len(plan.trainers)), GLOBALTENSOR_SECRET=secret, GLOBALTENSOR_JOB_ID=job_id)
    if proc.role == "trainer":
        env["PADDLE_TRAINER_ID"] = str(proc.index)
    else:
        env.pop("PADDLE_TRAINER_ID", None)
        env["PADDLE_PSERVER_ID"] = str(proc.index)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_NUM_THREADS", "1")  # several processes share this host's cores
    if not any(k in env for k in _MALLOC):  # glibc: a step's arrays (under 16 MB) reuse the heap's pages instead of
        env.update(_MALLOC)                 # handing them back after each step and faulting them in again (s6)
    return env


_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(16 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


def _secret(plan):
    secret = os.environ.get("GLOBALTENSOR_SECRET")
    if secret:
        try:
            bytes.fromhex(secret)
        except ValueError:
            raise ValueError("GLOBALTENSOR_SECRET must be a hex string (the same on every host)") from None
        return secret
    if plan.multi_host:
        raise ValueError("this job spans several hosts: set GLOBALTENSOR_SECRET to the same hex string on every host "
                         "(e.g. `export GLOBALTENSOR_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))')`)")
    return os.urandom(32).hex()


class _TrainersWatch:
    """The wait's stop(): a signal to the launcher, or _TRAINERS_DONE once every local trainer ended
    well and the servers did not return within SERVER_GRACE seconds."""

    def __init__(self, sup, trainer_ranks, signals, clock):
        self.sup, self.trainer_ranks, self.signals, self.clock = sup, trainer_ranks, signals, clock
        self.done_at = None

    def __call__(self):
        if self.signals():
            return self.signals()
        if not self.trainer_ranks:
            return None
        if self.done_at is None:
            if all(r.proc.poll() == 0 for r in self.sup.ranks if r.rank in self.trainer_ranks):
                self.done_at = self.clock()
            return None
        return _TRAINERS_DONE if self.clock() - self.done_at > SERVER_GRACE else None


def main(args):
    """Run the PS job's local processes; returns the launcher's exit code."""
    try:
        plan = plan_job(args)
        secret = _secret(plan)
    except ValueError as exc:
        sys.stderr.write(f"{_TAG} error: {exc}\n")
        return 2
    job_id = args.job_id or os.environ.get("GLOBALTENSOR_JOB_ID") or hashlib.sha256(
        f"{secret}|{','.join(plan.servers)}|{','.join(plan.trainers)}".encode()).hexdigest()[:12]
    target = ["-m", args.script] if getattr(args, "module", False) else [args.script]
    raw = {n for n, p in enumerate(plan.local) if p.role == "trainer" and p.index == 0}
    sup = Supervisor(console_write, log_dir=args.log_dir, raw_ranks=raw, hold_tracebacks=True)
    signals = _Signals()
    for n, proc in enumerate(plan.local):  # servers first; nobody waits for anybody here
        sup.start(n, [sys.executable, "-u", *target, *args.script_args], environment(plan, proc, secret, job_id),
                  name=proc.name, log_name=proc.log_name)
    sup.start_streaming()
    trainers = {n for n, p in enumerate(plan.local) if p.role == "trainer"}
    outcome = sup.wait(stop=_TrainersWatch(sup, trainers, signals, time.monotonic))
    if outcome.failed:
        root = _report_failure(outcome.failed, others="processes")
        sup.terminate(grace=args.grace_period)
        _report_others(sup, outcome.failed, root)
        failed = outcome.failed
        sys.stderr.write(f"{_TAG} job failed: {failed.name} {describe_exit(failed.proc.returncode)} (root cause); "
                         f"exit code {exit_code(failed.proc.returncode)}\n")
        return exit_code(failed.proc.returncode)
    if outcome.signum == _TRAINERS_DONE:
        left = ", ".join(r.name for r in sup.ranks if r.proc.poll() is None)
        sys.stderr.write(f"{_TAG} every trainer here ended well; stopping {left}, still running {SERVER_GRACE:g} s "
                         f"later (a trainer that calls fleet.stop_worker() lets the servers return by themselves)\n")
        sup.terminate(grace=args.grace_period)
        return 0
    if outcome.signum:
        forward = outcome.signum if outcome.signum == signal.SIGINT else signal.SIGTERM
        sup.terminate(grace=args.grace_period, signum=forward)
        sys.stderr.write(f"{_TAG} stopped by {signal.Signals(outcome.signum).name}; every process was stopped\n")
        return 128 + int(outcome.signum)
    sup.reap()
    return 0
