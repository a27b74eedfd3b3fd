# %% [markdown]
# # 00 · Processes and collectives
#
# globaltensor runs one process per rank (SPMD): every rank runs the same code and learns who
# it is from `gt.env`. In a notebook, `gt.distributed.spawn` starts the ranks; in a script, the
# launcher does (`python -m globaltensor.distributed.launch --nproc_per_node 2 train.py`).
#
# This tutorial shows the layer everything else stands on: collectives over shared memory.

# %%
import os
import subprocess
import sys
import tempfile

import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist

print("in this notebook: rank", gt.env.get_rank(), "of", gt.env.get_world_size())


# %% [markdown]
# ## Running a function on several ranks
#
# `spawn(fn, args, nprocs)` runs `fn(*args)` in fresh processes and returns what each rank
# returned. Output comes back prefixed with the rank.

# %%
def hello(greeting):
    print(f"{greeting} from rank {gt.env.get_rank()} of {gt.env.get_world_size()}")
    return gt.env.get_rank() * 10


dist.spawn(hello, args=("hello",), nprocs=2)


# %% [markdown]
# ## Collectives
#
# `all_reduce` combines arrays element-wise across ranks, in place. `all_gather` concatenates
# every rank's array along axis 0 (lengths may differ), `reduce_scatter` sums and hands each
# rank one piece, `broadcast` copies one rank's array to all, `all_to_all` exchanges pieces,
# and `send`/`recv` move an array between two ranks.

# %%
def collectives():
    rank = gt.env.get_rank()
    x = np.full(3, rank + 1.0)
    dist.all_reduce(x)                                   # [3, 3, 3] on both ranks
    gathered = dist.all_gather(np.arange(rank + 1))      # rank 0 sends 1 row, rank 1 sends 2
    piece = dist.reduce_scatter(np.arange(5.0))          # sum, then rows 0-2 / rows 3-4
    y = np.full(2, float(rank))
    dist.broadcast(y, src=1)                             # rank 1's values everywhere
    return x.tolist(), gathered.tolist(), piece.tolist(), y.tolist()


for rank, result in enumerate(dist.spawn(collectives, nprocs=2)):
    print(rank, result)


# %% [markdown]
# ## Zero copy: arrays in shared memory
#
# Arrays made with `dist.empty_shared` live in a shared-memory arena that the other ranks on
# the machine have mapped, so a collective reads them in place instead of staging a copy.
# Large tensors of later tutorials are stored this way automatically.

# %%
def timed_all_reduce(shared):
    import time
    n = 4 << 20  # 16 MiB of float32
    x = dist.empty_shared((n,), np.float32) if shared else np.empty(n, np.float32)
    x[...] = 1
    dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(x)
    return (time.perf_counter() - start) / 5 * 1e3


print("16 MiB all_reduce, shared memory: %.2f ms" % dist.spawn(timed_all_reduce, args=(True,), nprocs=2)[0])
print("16 MiB all_reduce, heap arrays:   %.2f ms" % dist.spawn(timed_all_reduce, args=(False,), nprocs=2)[0])


# %% [markdown]
# ## Errors instead of hangs
#
# Every rank checks the arguments before communicating, so bad input raises on every rank.
# A rank that never arrives gives a timeout error naming it (`GLOBALTENSOR_TIMEOUT`, default
# 300 s), and a rank that dies is noticed within a fraction of a second. In `spawn`, a failing
# rank's traceback is raised in the parent.

# %%
def one_rank_is_late():
    import time
    if gt.env.get_rank() == 1:
        time.sleep(3)
        return "slept"
    dist.barrier()  # the first collective also joins the job; rank 1 joins later
    return "joined"


def mismatched_sizes():
    try:
        dist.all_reduce(np.zeros(2 + gt.env.get_rank()))
    except dist.CollectiveError as exc:
        return str(exc).splitlines()[0]


print(dist.spawn(mismatched_sizes, nprocs=2)[0])
try:
    dist.spawn(one_rank_is_late, nprocs=2, env={"GLOBALTENSOR_TIMEOUT": "1"})
except dist.SpawnError as exc:
    print(str(exc).splitlines()[0])
    print(str(exc).strip().splitlines()[-1])

# %% [markdown]
# ## The launcher
#
# Scripts start with the launcher, which sets torchrun's variables for each rank, prefixes the
# output of ranks other than 0, and stops every rank if one fails.

# %%
script = """
import numpy as np, globaltensor as gt
from globaltensor import distributed as dist
x = np.array([gt.env.get_rank() + 1.0])
dist.all_reduce(x)
print("rank", gt.env.get_rank(), "sum", x[0])
"""
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "script.py")
    with open(path, "w") as f:
        f.write(script)
    result = subprocess.run([sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2", path],
                            capture_output=True, text=True, timeout=120)
print(result.stdout)
