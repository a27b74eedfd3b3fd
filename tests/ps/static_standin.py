"""A private stand-in of globaltensor.ps (spec, partition, tables) for the static-mode PS tests,
installed only while the real package is not there (it is being written beside these tests), and
a fake in-process client that applies SGD itself (sync: the trainers' pushes averaged per step)."""
import dataclasses
import hashlib
import math
import sys
import threading
import types

import numpy as np


def _install():
    try:
        import globaltensor.ps  # noqa: F401
        import globaltensor.ps.tables  # noqa: F401
        import globaltensor.ps.partition  # noqa: F401
        return False
    except ImportError:
        pass

    @dataclasses.dataclass(frozen=True)
    class Rule:
        kind: str
        lr: float
        params: tuple = ()

    @dataclasses.dataclass(frozen=True)
    class DenseSpec:
        name: str
        shape: tuple
        dtype: str = "float32"

    @dataclasses.dataclass(frozen=True)
    class SparseSpec:
        name: str
        dim: int
        init: tuple = ("uniform", -0.05, 0.05)
        seed: int = 0
        entry: tuple = ("none",)
        padding_idx: object = None
        dtype: str = "float32"

    @dataclasses.dataclass(frozen=True)
    class JobSpec:
        servers: tuple
        trainers: int
        mode: str
        rule: Rule
        dense: tuple = ()
        sparse: tuple = ()
        k_steps: int = 0
        min_block_size: int = 8192
        slice_var_up: bool = True
        split_method: str = "RoundRobin"
        secret: bytes = b""
        timeout: float = 60.0
        dead_after: float = 5.0

        def validate(self):
            if self.trainers < 1 or not self.servers:
                raise ValueError("bad job")

    @dataclasses.dataclass(frozen=True)
    class Block:
        name: str
        index: int
        server: int
        row_start: int
        row_end: int
        shape: tuple

    def dense_blocks(spec, n_servers, min_block_size=8192, slice_var_up=True, split_method="RoundRobin"):
        numel = math.prod(spec.shape)
        rows = spec.shape[0] if spec.shape else 1
        count = min(n_servers, max(1, numel // min_block_size)) if slice_var_up else 1
        per = math.ceil(rows / count)
        out, start = [], 0
        while start < rows:
            end = min(rows, start + per)
            out.append(Block(f"{spec.name}.block{len(out)}", len(out), 0, start, end,
                             (end - start,) + tuple(spec.shape[1:])))
            start = end
        return out

    def job_blocks(job):
        blocks, k = [], 0
        for spec in job.dense:
            for b in dense_blocks(spec, len(job.servers), job.min_block_size, job.slice_var_up, job.split_method):
                if job.split_method == "HashName":
                    server = int(hashlib.sha1(b.name.encode()).hexdigest(), 16) % len(job.servers)
                else:
                    server, k = k % len(job.servers), k + 1
                blocks.append(dataclasses.replace(b, server=server))
        return blocks

    class SparseTable:
        def __init__(self, spec, rule):
            self.spec, self.rule, self.rows = spec, rule, {}

        def _new(self, i):
            name = int(hashlib.sha1(self.spec.name.encode()).hexdigest()[:8], 16)
            rng = np.random.default_rng([self.spec.seed, name, int(i) & (2 ** 63 - 1)])
            lo, hi = self.spec.init[1], self.spec.init[2]
            return rng.uniform(lo, hi, self.spec.dim).astype(self.spec.dtype)

        def pull(self, ids, is_test=False):
            out = np.zeros((len(ids), self.spec.dim), self.spec.dtype)
            for k, i in enumerate(ids):
                i = int(i)
                if i == self.spec.padding_idx:
                    continue
                if i not in self.rows and not is_test:
                    self.rows[i] = self._new(i)
                if i in self.rows:
                    out[k] = self.rows[i]
            return out

        def push(self, ids, grads):
            for i, g in zip(ids, grads):
                if int(i) != self.spec.padding_idx:
                    self.rows[int(i)] = self.rows[int(i)] - self.rule.lr * g

        def add(self, ids, deltas):
            for i, d in zip(ids, deltas):
                self.rows[int(i)] = self.rows.get(int(i), self._new(i)) + d

        def __len__(self):
            return len(self.rows)

        def state(self):
            ids = np.array(sorted(self.rows), np.int64)
            values = np.array([self.rows[i] for i in ids], self.spec.dtype).reshape(-1, self.spec.dim)
            return {"ids": ids, "values": values}

        def load_state(self, d):
            self.rows = {int(i): np.array(v) for i, v in zip(d["ids"], d["values"])}

    ps = types.ModuleType("globaltensor.ps")
    ps.Rule, ps.DenseSpec, ps.SparseSpec, ps.JobSpec = Rule, DenseSpec, SparseSpec, JobSpec
    partition = types.ModuleType("globaltensor.ps.partition")
    partition.Block, partition.dense_blocks, partition.job_blocks = Block, dense_blocks, job_blocks
    tables = types.ModuleType("globaltensor.ps.tables")
    tables.SparseTable = SparseTable
    ps.partition, ps.tables = partition, tables
    sys.modules.update({"globaltensor.ps": ps, "globaltensor.ps.partition": partition,
                        "globaltensor.ps.tables": tables})
    import globaltensor
    globaltensor.ps = ps
    return True


STANDIN = _install()


class FakeServer:
    """The servers of a job in one process: SGD on the dense values and the sparse rows; sync mode
    averages each step's pushes over the trainers before applying them (threads wait on it)."""

    def __init__(self, job, initial):
        from globaltensor.ps.tables import SparseTable
        self.job, self.dense = job, {k: np.array(v, copy=True) for k, v in initial.items()}
        self.sparse = {s.name: SparseTable(s, job.rule) for s in job.sparse}
        self.cond, self.step, self.sums, self.pushed = threading.Condition(), 0, {}, 0
        self.stopped, self.barrier = set(), 0

    def client(self, trainer_id):
        return FakeClient(self, trainer_id)

    def push(self, dense, sparse):
        lr = self.job.rule.lr
        with self.cond:
            if self.job.mode == "async":
                for k, g in dense.items():
                    self.dense[k] -= lr * g
                for name, (ids, g) in sparse.items():
                    self.sparse[name].push(ids, g)
                return
            for k, g in dense.items():
                self.sums[k] = self.sums.get(k, 0) + g
            for name, (ids, g) in sparse.items():
                self.sums.setdefault(("sparse", name), []).append((ids, g))
            self.pushed += 1
            if self.pushed == self.job.trainers:
                n = self.job.trainers
                for k, v in self.sums.items():
                    if isinstance(k, tuple):
                        ids = np.concatenate([i for i, _ in v])
                        uniq, inv = np.unique(ids, return_inverse=True)
                        g = np.zeros((len(uniq), v[0][1].shape[1]), v[0][1].dtype)
                        np.add.at(g, inv, np.concatenate([x for _, x in v]))
                        self.sparse[k[1]].push(uniq, g / n)
                    else:
                        self.dense[k] -= lr * v / n
                self.sums, self.pushed, self.step = {}, 0, self.step + 1
                self.cond.notify_all()


class FakeClient:
    """The Client methods static/ps.py calls, on a FakeServer."""

    def __init__(self, server, trainer_id):
        self.server, self.trainer_id, self.job = server, trainer_id, server.job
        self.steps, self.calls, self.pending = 0, [], {}

    def connect(self):
        self.calls.append("connect")

    def pull_dense(self, names=None):
        self.calls.append("pull_dense")
        if self.pending:
            self.flush()
        with self.server.cond:
            if self.job.mode == "sync":
                assert self.server.cond.wait_for(lambda: self.server.step >= self.steps, timeout=20)
            return {k: v.copy() for k, v in self.server.dense.items() if names is None or k in names}

    def push_dense(self, grads):
        self.calls.append("push_dense")
        self.pending["dense"] = {k: np.array(v, copy=True) for k, v in grads.items()}

    def push_sparse(self, table, ids, grads):
        self.calls.append("push_sparse")
        self.pending.setdefault("sparse", {})[table] = (np.asarray(ids), np.asarray(grads))

    def pull_sparse(self, table, ids, is_test=False):
        self.calls.append("pull_sparse")
        with self.server.cond:
            return self.server.sparse[table].pull(np.asarray(ids), is_test)

    def flush(self):
        """The step's pushes reach the server together (pull_dense of the step follows)."""
        dense, sparse = self.pending.pop("dense", {}), self.pending.pop("sparse", {})
        self.server.push(dense, sparse)
        self.steps += 1

    def push_dense_delta(self, deltas):
        self.calls.append("push_dense_delta")
        with self.server.cond:
            for k, d in deltas.items():
                self.server.dense[k] += d

    def push_sparse_delta(self, table, ids, deltas):
        self.calls.append("push_sparse_delta")
        with self.server.cond:
            self.server.sparse[table].add(np.asarray(ids), np.asarray(deltas))

    def barrier(self):
        self.calls.append("barrier")
        with self.server.cond:
            self.server.barrier += 1
            self.server.cond.notify_all()
            goal = -(-self.server.barrier // self.job.trainers) * self.job.trainers
            assert self.server.cond.wait_for(lambda: self.server.barrier >= goal, timeout=20)

    def stop(self):
        self.calls.append("stop")
        self.server.stopped.add(self.trainer_id)
