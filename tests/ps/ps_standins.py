"""Stand-ins for partition.py / tables.py (the tables helper's part) while they are not in this tree: SGD only."""
import math
import os
import sys
import types
from dataclasses import dataclass

import numpy as np

import globaltensor

PS_DIR = os.path.join(os.path.dirname(globaltensor.__file__), "ps")
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True)
class Block:
    name: str
    index: int
    server: int
    row_start: int
    row_end: int
    shape: tuple


def _job_blocks(job):
    out, rr = [], 0
    for d in job.dense:
        numel, rows = math.prod(d.shape), d.shape[0]
        count = min(len(job.servers), max(1, numel // job.min_block_size)) if job.slice_var_up else 1
        per = math.ceil(rows / count)
        for i, start in enumerate(range(0, rows, per)):
            end = min(rows, start + per)
            out.append(Block(f"{d.name}.block{i}", i, rr % len(job.servers), start, end,
                             (end - start,) + tuple(d.shape[1:])))
            rr += 1
    return out


def _mix(x):
    with np.errstate(over="ignore"):
        x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _server_of_ids(ids, n):
    return (_mix(np.asarray(ids, np.int64).view(np.uint64)) % np.uint64(n)).astype(np.int64)


class _DenseBlock:
    def __init__(self, block, value, rule):
        self.block, self.value, self.rule = block, value, rule

    def apply(self, grad):
        self.value -= self.value.dtype.type(self.rule.lr) * grad

    def add(self, delta):
        self.value += delta


class _SparseTable:
    def __init__(self, spec, rule):
        self.spec, self.rule, self.rows = spec, rule, {}

    def _init(self, i):
        rng = np.random.default_rng([self.spec.seed, int(np.int64(i).view(np.uint64))])
        return rng.uniform(self.spec.init[1], self.spec.init[2], self.spec.dim).astype(self.spec.dtype)

    def pull(self, ids, is_test=False):
        out = np.zeros((len(ids), self.spec.dim), self.spec.dtype)
        for k, i in enumerate(ids.tolist()):
            if i not in self.rows and not is_test:
                self.rows[i] = self._init(i)
            if i in self.rows:
                out[k] = self.rows[i]
        return out

    def push(self, ids, grads):
        for i, g in zip(ids.tolist(), grads):
            if i in self.rows:
                self.rows[i] -= self.rows[i].dtype.type(self.rule.lr) * g

    def add(self, ids, deltas):
        for i, d in zip(ids.tolist(), deltas):
            if i in self.rows:
                self.rows[i] += d

    def __len__(self):
        return len(self.rows)


def _save_server(dirname, job, index, dense_blocks, sparse_tables):
    os.makedirs(dirname, exist_ok=True)
    np.savez(os.path.join(dirname, f"server_{index}.npz"), **{n: b.value for n, b in dense_blocks.items()})


def install():
    """Put the stand-ins where globaltensor.ps imports them from, when the real modules are missing."""
    if not os.path.exists(os.path.join(PS_DIR, "partition.py")):
        sys.modules["globaltensor.ps.partition"] = types.SimpleNamespace(
            Block=Block, job_blocks=_job_blocks, server_of_ids=_server_of_ids)
    if not os.path.exists(os.path.join(PS_DIR, "tables.py")):
        sys.modules["globaltensor.ps.tables"] = types.SimpleNamespace(DenseBlock=_DenseBlock, SparseTable=_SparseTable)
    if not os.path.exists(os.path.join(PS_DIR, "checkpoint.py")):
        sys.modules["globaltensor.ps.checkpoint"] = types.SimpleNamespace(save_server=_save_server)
