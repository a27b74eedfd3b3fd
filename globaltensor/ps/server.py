"""Server(job, index): one parameter server's serving loop (sync / async / GEO steps, barriers, save, liveness)."""
from __future__ import annotations

import logging
import math
import socket
import time

import numpy as np
import zmq

from . import wire
from .errors import PSError
from .partition import job_blocks
from .spec import JobSpec
from .tables import DenseBlock, SparseTable, sum_rows_by_id  # noqa: F401 (the client's)

LOG = logging.getLogger("globaltensor.ps")
GATED = ("pull_dense", "pull_sparse", "next", "save", "barrier")  # sync: wait until the steps before are applied
POLL_MS = 100
RECV_HWM = 16  # messages queued from one connection (zmq's default, 1000, could hold 1000 full gradients)


def bind_address(endpoint: str) -> str:
    """tcp://ip:port for an 'host:port' endpoint: exactly that interface, never '*'."""
    host, _, port = endpoint.rpartition(":")
    return f"tcp://{socket.gethostbyname(host.strip('[]'))}:{int(port)}"


def job_summary(job: JobSpec) -> dict:
    """The fields every server and trainer of a job must agree on, as JSON values (compared at connect)."""
    return {"servers": list(job.servers), "trainers": job.trainers, "mode": job.mode, "k_steps": job.k_steps,
            "rule": [job.rule.kind, float(job.rule.lr), [[str(k), _plain(v)] for k, v in job.rule.params]],
            "dense": [[d.name, [int(n) for n in d.shape], str(d.dtype)] for d in job.dense],
            "sparse": [[s.name, int(s.dim), str(s.dtype)] for s in job.sparse],
            "slicing": [job.min_block_size, job.slice_var_up, job.split_method]}


def _plain(v):
    return float(v) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else str(v)


def param_of(block_name: str, dense_names) -> str:
    """The dense parameter a block belongs to (its name, or 'w' of a block named 'w.block0')."""
    return block_name if block_name in dense_names else block_name.rsplit(".block", 1)[0]


class Server:
    """One parameter server of `job`: serve() answers trainers until every trainer has sent stop."""

    def __init__(self, job: JobSpec, index: int, initial: dict | None = None, model_dir: str | None = None):
        job.validate()
        if not 0 <= index < len(job.servers):
            raise ValueError(f"server index {index} outside the job's {len(job.servers)} servers {job.servers}")
        self.job, self.index = job, index
        self.endpoint = job.servers[index]
        self.name = f"parameter server {self.endpoint} (server {index})"
        if model_dir is not None:
            from .checkpoint import load_server  # the tables helper's module, needed only here
            dense, self.sparse = load_server(model_dir, job, index)
            names = {d.name for d in job.dense}  # keyed by parameter ("w" or "w.block0": one block a server)
            self.dense = {param_of(k, names): b for k, b in dense.items()}
        else:
            self.dense = self._dense_from(initial or {})
            self.sparse = {s.name: SparseTable(s, job.rule) for s in job.sparse}
        self.trainers = job.trainers
        self.done = [-1] * job.trainers          # sync: the last step each trainer has finished
        self.applied = -1                        # sync: every step up to this one is applied
        self.pending: dict[int, dict] = {}       # sync: step -> {"dense": {block: sum}, "sparse": {table: [...]}}
        self.deferred: list = []                 # sync: gated requests waiting for their step
        self.barriers: dict[int, dict] = {}      # barrier number -> {trainer: (ident, req)}
        self.stopped: set[int] = set()
        self.dead: dict[int, str] = {}
        self.last_seen: list[float | None] = [None] * job.trainers
        self.failure: PSError | None = None
        self.failed_at = 0.0
        self.told: set[int] = set()
        self.version = 0                         # bumped by every change of a dense block
        self._copies: tuple = (-1, {})           # (version, {name: copy}): one copy of a version for all replies
        self._ctx = zmq.Context()
        self.sock = self._ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
        self.sock.setsockopt(zmq.RCVHWM, RECV_HWM)  # per trainer connection: a trainer ahead waits (TCP backpressure)
        try:
            self.sock.bind(bind_address(self.endpoint))
        except zmq.ZMQError as e:
            self.close()
            raise PSError(f"{self.name} cannot bind {self.endpoint}: {e}") from None

    def _dense_from(self, initial: dict) -> dict:
        specs = {d.name: d for d in self.job.dense}
        unknown = sorted(set(initial) - set(specs))
        if unknown:
            raise ValueError(f"{self.name}: initial values for {unknown}, which the job's dense tables do not name")
        blocks = {}
        for b in job_blocks(self.job):
            if b.server != self.index:
                continue
            spec = specs[param_of(b.name, specs)]
            full = initial.get(spec.name)
            if full is None:
                value = np.zeros(b.shape, dtype=spec.dtype)
            else:
                full = np.asarray(full, dtype=spec.dtype)
                if full.shape != tuple(spec.shape):
                    raise ValueError(f"{self.name}: initial {spec.name} has shape {full.shape}, "
                                     f"the job says {tuple(spec.shape)}")
                value = full[b.row_start:b.row_end].reshape(b.shape).copy()
            blocks[spec.name] = DenseBlock(b, value, self.job.rule)  # at most one block of a parameter a server
        return blocks

    # ---- the loop --------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer trainers until each has stopped; raise PSError naming a trainer that died (or never came)."""
        self.started = time.monotonic()
        try:
            while not self._finished():
                if self.sock.poll(POLL_MS):
                    for _ in range(256):
                        msg = wire.recv(self.sock, self.job.secret, routed=True)
                        if msg is not None:
                            self._handle(*msg)
                        if not self.sock.poll(0):
                            break
                self._check_trainers()
        finally:
            self.close()

    def _finished(self) -> bool:
        if self.failure is not None:
            live = set(range(self.trainers)) - self.stopped - set(self.dead)
            if live <= self.told or time.monotonic() - self.failed_at > self.job.dead_after:
                raise self.failure
            return False
        if len(self.stopped) + len(self.dead) < self.trainers:
            return False
        if self.dead:
            raise PSError(f"{self.name}: " + "; ".join(self.dead[t] for t in sorted(self.dead)))
        return True

    def _check_trainers(self) -> None:
        now = time.monotonic()
        for t in range(self.trainers):
            if t in self.stopped or t in self.dead:
                continue
            seen = self.last_seen[t]
            age, limit = (now - seen, self.job.dead_after) if seen is not None else (now - self.started,
                                                                                      self.job.timeout)
            if age > limit:
                what = "stopped answering" if seen is not None else "never connected"
                self._trainer_dead(t, f"trainer {t} {what}: silent for {age:.1f} s "
                                      f"(limit {limit} s) and not stopped")

    def _trainer_dead(self, t: int, why: str) -> None:
        LOG.warning("globaltensor.ps: %s: %s", self.name, why)
        self.dead[t] = why
        if self.job.mode == "sync" and self.failure is None:
            self._fail(PSError(f"{why}; {self.name} gives up the sync step"))
        else:
            self._release_barriers()

    def _fail(self, failure: PSError) -> None:
        """Sync mode cannot go on: answer every waiting request (and, from now on, every request) with failure."""
        if self.failure is None:
            self.failure = failure
            self.failed_at = time.monotonic()
            for ident, header, _ in self.deferred:
                self._error(ident, header, str(self.failure))
            self.deferred = []
            for waiting in self.barriers.values():
                for t2, (ident, req) in waiting.items():
                    self._error(ident, {"req": req, "trainer": t2}, str(self.failure))
            self.barriers = {}

    # ---- one message -----------------------------------------------------------------------------------

    def _handle(self, ident: bytes, header: dict, arrays: list) -> None:
        t = header.get("trainer")
        op = header.get("op")
        if op == "hello":
            differ = [f"{k}={v!r} (here {mine!r})" for k, mine in job_summary(self.job).items()
                      if (v := header.get("job", {}).get(k)) != mine]
            if differ:
                self._error(ident, header, f"{self.name} refused trainer {t!r}: its job differs from this "
                                           "server's: " + ", ".join(differ))
                return
        if not isinstance(t, int) or not 0 <= t < self.trainers:
            self._error(ident, header, f"{self.name} serves a job of {self.trainers} trainers; "
                                       f"trainer id {t!r} is outside it")
            return
        self.last_seen[t] = time.monotonic()
        if op == "ping":
            self._reply(ident, header, error=str(self.failure) if self.failure else None)
            return
        if self.failure is not None:
            self._error(ident, header, str(self.failure))
            return
        self._guarded(self._dispatch, ident, header, arrays, op, t)

    def _guarded(self, handler, ident, header, arrays, op, t) -> None:
        try:
            handler(ident, header, arrays, op, t)
        except Exception as e:  # the trainer raises it, naming this server; the server goes on serving
            LOG.warning("globaltensor.ps: %s refused %r from trainer %d", self.name, op, t, exc_info=True)
            self._error(ident, header, f"{self.name} refused {op!r} from trainer {t}: {type(e).__name__}: {e}")

    def _dispatch(self, ident, header, arrays, op, t) -> None:
        sync = self.job.mode == "sync"
        step = int(header.get("step", 0))
        if op == "stop":
            self.stopped.add(t)
            self.done[t] = math.inf
            self._reply(ident, header)
        elif sync:
            self.done[t] = max(self.done[t], step - 1)
        if op in ("push_dense", "push_sparse") and sync:
            self._accumulate(step, op, header, arrays)
        elif op in GATED and sync and step - 1 > self.applied:
            self.deferred.append((ident, header, arrays))
        elif op != "stop":
            self._run(ident, header, arrays, op, t)
        if sync:
            self._apply_ready()
        self._release_barriers()

    def _run(self, ident, header, arrays, op, t) -> None:
        if op == "hello":
            self._reply(ident, header, extra={"blocks": sorted(self.dense), "mode": self.job.mode})
        elif op in ("pull_dense", "next"):
            if op == "pull_dense" or header.get("dense"):
                names = header.get("names") or sorted(self.dense)
                self._reply(ident, header, self._dense_values(names), {"names": names})
        elif op == "pull_sparse":
            rows = self.sparse[header["table"]].pull(arrays[0], is_test=bool(header.get("is_test")))
            self._reply(ident, header, [rows])
        elif op == "push_dense":  # async: applied on arrival
            self.version += 1
            for n, g in zip(header["names"], arrays):
                self.dense[n].apply(self._checked(n, g))
        elif op == "push_sparse":
            self.sparse[header["table"]].push(arrays[0], arrays[1])
        elif op == "add_dense":
            self.version += 1
            for n, d in zip(header["names"], arrays):
                self.dense[n].add(self._checked(n, d))
        elif op == "add_sparse":
            self.sparse[header["table"]].add(arrays[0], arrays[1])
        elif op == "set_dense":
            self.version += 1
            for n, v in zip(header["names"], arrays):
                self.dense[n].value[...] = self._checked(n, v)
            self._reply(ident, header)
        elif op == "barrier":
            self.barriers.setdefault(int(header["n"]), {})[t] = (ident, header.get("req"))
        elif op == "save":
            from .checkpoint import save_server
            save_server(header["dirname"], self.job, self.index, self.dense, self.sparse)
            self._reply(ident, header)
        else:
            raise ValueError(f"unknown op {op!r}")

    def _dense_values(self, names: list) -> list:
        """Copies of the blocks (a reply's frames must not change while zmq sends them), shared by every reply
        of the same version (sync: each trainer pulls the same step)."""
        if self._copies[0] != self.version:
            self._copies = (self.version, {})
        cache = self._copies[1]
        for n in names:
            if n not in cache:
                cache[n] = self.dense[n].value.copy()
        return [cache[n] for n in names]

    def _checked(self, name: str, array: np.ndarray) -> np.ndarray:
        want = self.dense[name].value.shape
        if array.shape != want:
            raise ValueError(f"{name} has shape {want}, the message carries {array.shape}")
        return array

    # ---- sync steps ------------------------------------------------------------------------------------

    def _accumulate(self, step: int, op: str, header: dict, arrays: list) -> None:
        if step <= self.applied:
            raise ValueError(f"a push for step {step}, which is already applied (trainer {header['trainer']})")
        acc = self.pending.setdefault(step, {"dense": {}, "sparse": {}})
        if op == "push_dense":
            for n, g in zip(header["names"], arrays):
                g = self._checked(n, g)
                have = acc["dense"].get(n)
                acc["dense"][n] = g.astype(g.dtype, copy=True) if have is None else np.add(have, g, out=have)
        else:
            if header["table"] not in self.sparse:
                raise KeyError(f"no sparse table {header['table']!r}")
            acc["sparse"].setdefault(header["table"], []).append((arrays[0], arrays[1]))  # frames stay alive

    def _apply_ready(self) -> None:
        """Apply every step all live trainers are past: the dense sums first, then the pulls of dense values that
        waited for them are answered (a trainer's forward can start), then the sparse rows, then the rest."""
        live = [self.done[t] for t in range(self.trainers) if t not in self.dead]
        frontier = min(live) if live else math.inf
        if frontier <= self.applied:
            return
        steps = sorted(s for s in self.pending if s <= frontier)
        try:
            for step in steps:
                self._apply_dense(self.pending[step])
            self._answer_deferred(frontier, dense_only=True)
            for step in steps:
                self._apply_sparse(self.pending.pop(step))
        except Exception as e:  # the step is half applied: nobody may go on
            LOG.error("globaltensor.ps: %s failed to apply steps %s", self.name, steps, exc_info=True)
            self._fail(PSError(f"{self.name} failed to apply step {steps}: {type(e).__name__}: {e}"))
            return
        self.applied = frontier if frontier != math.inf else max(self.applied, 2 ** 62)
        self._answer_deferred(self.applied)

    def _answer_deferred(self, upto, dense_only: bool = False) -> None:
        """Run the deferred requests of steps up to `upto` (dense_only: the pulls of dense values only)."""
        def due(d):
            ready = int(d[1].get("step", 0)) - 1 <= upto
            return ready and (not dense_only or d[1].get("op") in ("next", "pull_dense"))
        ready = [d for d in self.deferred if due(d)]
        if not ready:
            return
        self.deferred = [d for d in self.deferred if not due(d)]
        for ident, header, arrays in ready:
            self._guarded(self._run, ident, header, arrays, header["op"], header["trainer"])

    def _apply_dense(self, acc: dict) -> None:
        """Each trainer's loss is the mean of its share: sum / trainers equals one process on the joined batch."""
        scale = 1.0 / self.trainers
        self.version += 1
        for n, g in acc.pop("dense").items():  # g is the step's own sum (_accumulate copied the first part)
            g *= g.dtype.type(scale)
            self.dense[n].apply(g)

    def _apply_sparse(self, acc: dict) -> None:
        for table, parts in acc["sparse"].items():
            self.sparse[table].push_parts(parts, 1.0 / self.trainers)

    def _release_barriers(self) -> None:
        live = set(range(self.trainers)) - self.stopped - set(self.dead)
        for n in sorted(self.barriers):
            waiting = self.barriers[n]
            if live <= set(waiting):
                for t, (ident, req) in waiting.items():
                    self._reply(ident, {"req": req, "trainer": t})
                del self.barriers[n]

    # ---- replies ---------------------------------------------------------------------------------------

    def _reply(self, ident, header, arrays=(), extra=None, error=None) -> None:
        out = {"op": "error" if error else "reply", "req": header.get("req"), "server": self.index}
        if error:
            out["error"] = error
            self.told.add(header.get("trainer"))
        out.update(extra or {})
        try:
            wire.send(self.sock, self.job.secret, out, arrays, ident=ident, flags=zmq.NOBLOCK)
        except zmq.Again:
            LOG.warning("globaltensor.ps: %s could not answer trainer %s (its queue is full)",
                        self.name, header.get("trainer"))

    def _error(self, ident, header, message: str) -> None:
        self._reply(ident, header, error=message)

    def close(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None and not sock.closed:
            sock.close()
        ctx = getattr(self, "_ctx", None)
        if ctx is not None and not ctx.closed:
            ctx.term()
