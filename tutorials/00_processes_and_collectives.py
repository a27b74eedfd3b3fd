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
# returned, as a list in rank order (checked below). Output comes back prefixed with the rank.

# %%
def hello(greeting):
    print(f"{greeting} from rank {gt.env.get_rank()} of {gt.env.get_world_size()}")
    return gt.env.get_rank() * 10


returned = dist.spawn(hello, args=("hello",), nprocs=2)
assert returned == [0, 10]  # rank r returned r * 10
returned


# %% [markdown]
# ## Collectives
#
# `all_reduce` combines arrays element-wise across ranks, in place. `all_gather` concatenates
# every rank's array along axis 0 (lengths may differ), `reduce_scatter` sums and hands each
# rank one piece, `broadcast` copies one rank's array to all, `all_to_all` exchanges pieces,
# and `send`/`recv` move an array between two ranks. Each result is checked against the same
# combination computed with numpy from every rank's input (exactly: small integers add exactly).

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


results = dist.spawn(collectives, nprocs=2)
for rank, result in enumerate(results):
    print(rank, result)

inputs = [np.full(3, r + 1.0) for r in range(2)]                  # what each rank passed to all_reduce
for rank, (x, gathered, piece, y) in enumerate(results):
    assert x == sum(inputs).tolist()                                # [3, 3, 3]
    assert gathered == np.concatenate([np.arange(r + 1) for r in range(2)]).tolist()
    assert piece == np.array_split(2 * np.arange(5.0), 2)[rank].tolist()  # rank's rows of the sum
    assert y == np.full(2, 1.0).tolist()                            # rank 1's values


# %% [markdown]
# ## Zero copy: arrays in shared memory
#
# Each rank has a shared-memory arena that the other ranks on the machine have mapped, so a
# collective reads an array that lives there in place instead of staging a copy. In a job of
# several ranks, numpy itself allocates its arrays of 256 KiB and more there (globaltensor
# installs itself as numpy's allocator): a plain `np.empty` is as fast to reduce as
# `dist.empty_shared`, and `gt.memory_stats()` shows what the arena holds. Only memory numpy did
# not allocate (here a `bytearray`) goes through staging. Whichever memory, the sums are the
# same (checked: six all_reduces of ones over two ranks give 2**6); the times depend on the
# machine, so they are printed, not checked.

# %%
def timed_all_reduce(kind):
    import time
    n = 4 << 20  # 16 MiB of float32
    if kind == "shared":
        x = dist.empty_shared((n,), np.float32)
    elif kind == "numpy":
        x = np.empty(n, np.float32)
        stats = gt.memory_stats()
        assert stats["numpy_allocator"] and stats["allocated_bytes"] >= x.nbytes  # x is in the arena
    else:  # memory numpy did not allocate: staged through shared memory
        x = np.frombuffer(bytearray(n * 4), np.float32)
    x[...] = 1
    dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(x)
    elapsed = (time.perf_counter() - start) / 5 * 1e3
    assert (x == 2.0 ** 6).all()  # each all_reduce doubled every element
    return elapsed


for kind in ("shared", "numpy", "heap"):
    print("16 MiB all_reduce, %-6s arrays: %.2f ms" % (kind, dist.spawn(timed_all_reduce, args=(kind,), nprocs=2)[0]))


# %% [markdown]
# ## Errors instead of hangs
#
# Every rank checks the arguments before communicating, so bad input raises on every rank.
# A rank that never arrives gives a timeout error naming it (`GLOBALTENSOR_TIMEOUT`, default
# 300 s), and a rank that dies is noticed within a fraction of a second. In `spawn`, a failing
# rank's traceback is raised in the parent. Checked below: both ranks raise the same message
# about the sizes, and the late rank gives `SpawnError` with rank 0's timeout, naming rank 1.

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


messages = dist.spawn(mismatched_sizes, nprocs=2)
print(messages[0])
assert messages[0] == messages[1] and "different sizes" in messages[0]  # the same error on every rank
try:
    dist.spawn(one_rank_is_late, nprocs=2, env={"GLOBALTENSOR_TIMEOUT": "1"})
except dist.SpawnError as exc:
    message = str(exc)
    print(message.splitlines()[0])
    print(message.strip().splitlines()[-1])
else:
    raise AssertionError("rank 1 was late, but spawn did not fail")
assert "rank 0 exited" in message and "timed out after 1.0 s waiting for rank 1" in message  # names the late rank

# %% [markdown]
# ## The launcher
#
# Scripts start with the launcher, which sets torchrun's variables for each rank, prefixes the
# output of ranks other than 0, and stops every rank if one fails. Checked: it exits with 0,
# both ranks print the numpy sum 1 + 2, and rank 1's line carries its prefix.

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
total = np.sum([rank + 1.0 for rank in range(2)])
assert result.returncode == 0, result.stderr
assert sorted(result.stdout.splitlines()) == sorted([f"rank 0 sum {total}", f"[rank 1] rank 1 sum {total}"])

# %% [markdown]
# ## Several machines
#
# The same script runs on several machines unchanged. Start the launcher once on each machine
# with torchrun's flags (the same `GLOBALTENSOR_SECRET` on both):
#
# ```
# # machine A (169.254.10.1)                      # machine B
# python -m globaltensor.distributed.launch \      python -m globaltensor.distributed.launch \
#   --nnodes 2 --node_rank 0 --master_addr 169.254.10.1 --master_port 29500 --nproc_per_node 2 train.py
#                                                   #   ... --node_rank 1 (the rest the same)
# ```
#
# or every rank at once with `mpirun -np 4 --host a:2,b:2 python train.py` (ranks from MPI's
# environment). Ranks on one machine still meet in shared memory; between machines the
# collectives go over MPI (`pip install -e ".[mpi]"`): a small all_reduce is one MPI Allreduce
# over every rank, a large one is reduced inside each machine, exchanged in slices between the
# machines, and spread again. Placements name global ranks and may span machines; boxing plans
# charge a byte between machines 8 times a byte through shared memory
# (`GLOBALTENSOR_NETWORK_FACTOR`), so on a mesh whose rows are the machines a conversion gathers
# inside a machine rather than across. A rank that dies on one machine ends the job on every
# machine within seconds, naming it. `globaltensor.distributed.netns.TwoHosts` makes two
# "machines" on one (network namespaces joined by a veth pair, each with its own `/dev/shm`; needs
# root) for tests and `benchmarks/bench_multinode.py`; details and figures: docs/multinode.md.
