"""A fake in-process parameter server for the static-mode PS tests: FakeServer applies SGD itself (sync:
the trainers' pushes of a step averaged, then applied once) and FakeClient has the Client methods
globaltensor/paddle/static/ps.py calls. The tests that start real servers use globaltensor.ps's."""
import threading

import numpy as np


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
