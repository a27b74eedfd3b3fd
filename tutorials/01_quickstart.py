# %% [markdown]
# # 01 · Quickstart: placement, SBP, to_global
#
# A *global tensor* is one value spread over several ranks. Two things say how:
#
# * its **placement**: which ranks hold it, as a 1-D or N-D mesh (`gt.placement("cpu", [0, 1])`);
# * its **SBP**, one per mesh axis: `split(dim)` (each rank holds a slice of `dim`),
#   `broadcast` (each rank holds all of it) or `partial_sum` (the value is the sum of the pieces).
#
# Every rank runs the same code. Here `gt.distributed.spawn` starts 2 or 4 ranks; a script
# would use `python -m globaltensor.distributed.launch --nproc_per_node 2 script.py`.

# %%
import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
print(S0, B, P, "|", repr(S0))


# %% [markdown]
# ## Creating global tensors
#
# Factories take `placement=` and `sbp=`. Each rank builds only its own piece. `shape` is the
# global shape; `to_local()` is this rank's piece (no copy); `numpy()` gathers the whole value
# on every rank (so every rank must call it).

# %%
def create():
    placement = gt.placement("cpu", [0, 1])
    x = gt.arange(10, placement=placement, sbp=S0)  # rank 0 holds 0..4, rank 1 holds 5..9
    return x.shape, x.to_local().numpy().tolist(), x.numpy().tolist()


for rank, result in enumerate(dist.spawn(create, nprocs=2)):
    print("rank", rank, "global shape, local piece, whole value:", result)


# %% [markdown]
# ## Reading a global tensor is a collective
#
# `x.numpy()`, `x.item()`, `x.tolist()` and `print(x)` of a global tensor gather its pieces:
# they are collectives, so **every rank calls them**. `if rank == 0: print(x)` would leave
# rank 0 waiting for ranks that never come; instead of hanging until the timeout, it fails
# within about a second and says what each rank was doing. Read the value on every rank, then
# print it on one:

# %%
def print_on_rank_0(careless):
    placement = gt.placement("cpu", [0, 1])
    x = gt.arange(4, placement=placement, sbp=S0)
    if careless:
        if gt.env.get_rank() == 0:
            print(x)                   # rank 1 has finished: rank 0 cannot gather
        return None
    value = x.numpy()                  # every rank
    if gt.env.get_rank() == 0:
        print("x =", value)            # one rank prints
    return value.tolist()


print(dist.spawn(print_on_rank_0, args=(False,), nprocs=2)[0])
try:
    dist.spawn(print_on_rank_0, args=(True,), nprocs=2)
except dist.SpawnError as exc:
    message = str(exc)
print(message[message.index("_native.CollectiveError") + 8:][:700])
assert "x.numpy(), x.item() and x.tolist() of a global tensor are collectives" in message


# %% [markdown]
# Pieces may be uneven: along a split of length L over k ranks the first L % k ranks get one
# more element, and empty pieces are fine. `gt.debug.visualize` draws who holds what.

# %%
def uneven():
    x = gt.zeros(5, 6, placement=gt.placement("cpu", [0, 1, 2]), sbp=S1)
    return gt.debug.layout_text(x), gt.debug.layout_text(gt.zeros(2, 4, placement=x.placement, sbp=S0))


layouts = dist.spawn(uneven, nprocs=3)[0]
print(layouts[0])
print(layouts[1])


# %% [markdown]
# ## Converting: `to_global` ("boxing")
#
# `x.to_global(placement=..., sbp=...)` changes the layout and keeps the value. The runtime
# picks the cheapest plan and inserts the collectives: split to broadcast is an all_gather,
# partial_sum to broadcast an all_reduce, split(0) to split(1) an all_to_all, and broadcast to
# split is a local slice. `gt.debug.explain` prints the plan; `gt.debug.count_collectives`
# counts what ran.

# %%
def convert():
    placement = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.arange(12.0).reshape(3, 4), placement=placement, sbp=S0)
    report = []
    for target in (B, S1, P):
        with gt.debug.count_collectives() as counted:
            y = x.to_global(sbp=target)
        report.append((str(target), dict(counted), bool((y.numpy() == x.numpy()).all())))
    if gt.env.get_rank() == 0:
        gt.debug.explain(x, sbp=S1)
    return report


for line in dist.spawn(convert, nprocs=2)[0]:
    print(line)


# %% [markdown]
# ## From local pieces
#
# `to_global` on a *local* tensor says how the ranks' pieces make one value: split pieces
# concatenate (their lengths may differ), broadcast takes the first rank's data, partial_sum
# adds the pieces up. Pieces that cannot fit (other dims or dtypes differ) raise the same
# clear error on every rank. `gt.tensor(data, placement=, sbp=)` is different: `data` is the
# whole value, so it must be the same on every rank; a checksum compared over the placement
# raises, naming the ranks whose data differs (`check_meta=False` skips that check).

# %%
def from_pieces():
    rank = gt.env.get_rank()
    placement = gt.placement("cpu", [0, 1])
    rows = gt.tensor(np.full((rank + 1, 2), float(rank))).to_global(placement, S0)
    total = gt.tensor(np.array([rank + 1.0])).to_global(placement, P)
    try:
        gt.tensor(np.zeros((2, 2 + rank))).to_global(placement, S0)
    except ValueError as exc:
        error = str(exc)
    return rows.numpy().tolist(), total.item(), error


print(dist.spawn(from_pieces, nprocs=2)[0])


# %% [markdown]
# ## 2-D meshes and moves between placements
#
# On a 2x2 mesh the SBP has one entry per mesh axis; `(S0, S1)` cuts rows along mesh axis 0 and
# columns along mesh axis 1. Tensors also move between placements (other ranks, other mesh
# shapes): ranks outside both only keep the books.

# %%
def mesh():
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    x = gt.tensor(np.arange(16.0).reshape(4, 4), placement=mesh, sbp=(S0, S1))
    piece = x.to_local().numpy().tolist()
    y = x.to_global(placement=gt.placement("cpu", [2, 3]), sbp=B)
    return piece, y.to_local().numpy().shape, gt.debug.layout_text(x)


results = dist.spawn(mesh, nprocs=4)
for rank, (piece, moved_shape, _) in enumerate(results):
    print(f"rank {rank}: piece {piece}; after the move, local shape {moved_shape}")
print(results[0][2])


# %% [markdown]
# ## Random numbers that do not depend on the layout
#
# After `gt.manual_seed(s)`, a random factory gives the same global values whatever the
# placement, SBP or number of ranks, so a multi-process run reproduces a one-process one.

# %%
def draw(sbp):
    gt.manual_seed(0)
    return gt.randn(2, 3, placement=gt.placement.all("cpu"), sbp=sbp).numpy()


gt.manual_seed(0)
one_process = gt.randn(2, 3).numpy()
print(one_process)
for sbp in (S0, S1, B):
    print(sbp, np.array_equal(dist.spawn(draw, args=(sbp,), nprocs=2)[0], one_process))
