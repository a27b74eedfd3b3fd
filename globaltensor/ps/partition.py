"""Which server holds what: Paddle's row-block slicing of dense parameters and the stable id -> server hash of sparse rows."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._mix import as_u64, name_hash, splitmix64
from .spec import DenseSpec, JobSpec


@dataclass(frozen=True)
class Block:
    """Rows [row_start, row_end) of dense parameter `name`, block `index` of it, held by server `server`.

    `shape` is the block's own shape (its rows, then the parameter's other dims); `param_shape` the whole
    parameter's. `block_name` is what Paddle prints: `w.block0`, `w.block1`, ... or plain `w` when one block."""
    name: str
    index: int
    server: int
    row_start: int
    row_end: int
    shape: tuple
    param_shape: tuple = ()
    blocks: int = 1

    @property
    def block_name(self) -> str:
        return self.name if self.blocks == 1 else f"{self.name}.block{self.index}"

    @property
    def rows(self) -> int:
        return self.row_end - self.row_start


def block_rows(shape: tuple, n_servers: int, min_block_size: int, slice_var_up: bool = True) -> list[tuple[int, int]]:
    """[(row_start, row_end), ...] of a dense parameter under Paddle's slice_variable rule.

    A row is everything after the first dim (a 1-D parameter's row is one element). Split count =
    min(servers, max(1, numel // min_block_size)); each block has ceil(rows / count) rows (Paddle's element
    count rounded up to whole rows), so the last may be shorter and fewer blocks than the count can remain
    (5 rows over 4 -> 2, 2, 1). slice_var_up=False: one block."""
    shape = tuple(int(n) for n in shape) or (1,)
    rows = shape[0]
    numel = math.prod(shape)
    count = 1 if not slice_var_up else min(n_servers, max(1, numel // min_block_size))
    per_block = -(-rows // count)
    return [(start, min(start + per_block, rows)) for start in range(0, rows, per_block)]


def dense_blocks(spec: DenseSpec, n_servers: int, min_block_size: int = 8192, slice_var_up: bool = True,
                 split_method: str = "RoundRobin", first_server: int = 0) -> list[Block]:
    """The blocks of one dense parameter, never two on one server. RoundRobin starts at `first_server` (job_blocks
    carries it across specs); HashName starts at a stable hash of the parameter's name (Paddle hashes each block's
    name with Python's salted hash(), which neither agrees across processes nor keeps a parameter's blocks apart)."""
    if n_servers < 1:
        raise ValueError(f"dense_blocks({spec.name!r}): n_servers {n_servers} must be >= 1")
    if min_block_size < 1:
        raise ValueError(f"dense_blocks({spec.name!r}): min_block_size {min_block_size} must be >= 1")
    shape = tuple(spec.shape) or (1,)
    spans = block_rows(shape, n_servers, min_block_size, slice_var_up)
    blocks = []
    for i, (start, end) in enumerate(spans):
        name = spec.name if len(spans) == 1 else f"{spec.name}.block{i}"
        if split_method == "RoundRobin":
            server = (first_server + i) % n_servers
        elif split_method == "HashName":  # the parameter's name picks block 0's server, the next blocks follow
            server = int((name_hash("HashName", spec.name) + np.uint64(i)) % np.uint64(n_servers))
        else:
            raise ValueError(f"split_method {split_method!r}: must be 'RoundRobin' or 'HashName'")
        blocks.append(Block(spec.name, i, server, start, end, (end - start,) + shape[1:], shape, len(spans)))
    return blocks


def job_blocks(job: JobSpec) -> list[Block]:
    """Every dense block of the job in spec order; RoundRobin deals servers over all of them in turn (as Paddle's
    dispatcher does over the program's parameters)."""
    out = []
    for spec in job.dense:
        out += dense_blocks(spec, len(job.servers), job.min_block_size, job.slice_var_up, job.split_method,
                            first_server=len(out) % len(job.servers))
    return out


def server_blocks(job: JobSpec, index: int) -> list[Block]:
    """The dense blocks server `index` holds."""
    return [b for b in job_blocks(job) if b.server == index]


def server_of_ids(ids: np.ndarray, n_servers: int) -> np.ndarray:
    """The server of each int64 id: splitmix64(id) mod n, the same on every process (int64 array, ids' shape)."""
    ids = np.asarray(ids)
    if n_servers < 1:
        raise ValueError(f"server_of_ids: n_servers {n_servers} must be >= 1")
    if ids.dtype.kind not in "iu":
        raise ValueError(f"server_of_ids: ids must be integers, got dtype {ids.dtype}")
    owner = splitmix64(as_u64(ids)) % np.uint64(n_servers)
    return owner.astype(np.int64).reshape(ids.shape)
