# %% [markdown]
# # 05 · Checkpoints
#
# `gt.save(obj, path, global_dst_rank=0)` gathers global tensors and writes them from one rank
# (a directory of `.npy` files and a JSON tree; no pickle). `gt.load(path, global_src_rank=0)`
# reads on one rank and hands the values to all; `load_state_dict` lays them out by each
# parameter's placement and SBP, so a checkpoint saved under one layout loads under any other.
# Writes go to a temporary name and are renamed at the end: an interrupted save leaves the
# previous checkpoint intact. `sharded=True` skips the gather: each rank writes its pieces,
# and loading reads only the slices each rank needs.
#
# Checked below for both kinds of checkpoint: the weight read back with plain `np.load` (no
# pickle) is the saved one, whole or as rank 0's and rank 1's rows, and the weights loaded on
# one rank and on a 2x2 mesh (where the weight keeps its `(S1, B)` layout) equal the saved ones
# exactly: loading only moves data.

# %%
import os
import tempfile

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
folder = tempfile.mkdtemp()


def model_on(placement, weight_sbp):
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    if placement is not None:
        model.to_global(placement, (B,) * placement.ndim)
        model[0].weight = nn.Parameter(model[0].weight.to_global(sbp=weight_sbp))
    return model


def save(path, sharded):
    gt.manual_seed(0)
    model = model_on(gt.placement.all("cpu"), S0)
    gt.save(model.state_dict(), path, sharded=sharded)
    return model[0].weight.numpy()


def load(path, ranks):
    gt.manual_seed(1)  # a different init, replaced by the checkpoint
    if ranks == 4:
        model = model_on(gt.placement("cpu", [[0, 1], [2, 3]]), (S1, B))
    else:
        model = model_on(None, None)
    model.load_state_dict(gt.load(path))
    if ranks == 4:
        assert model[0].weight.sbp == (S1, B)  # the checkpoint's values, this model's layout
    return model[0].weight.numpy()


for sharded in (False, True):
    path = os.path.join(folder, "sharded" if sharded else "gathered")
    saved = dist.spawn(save, args=(path, sharded), nprocs=2)[0]
    on_one = load(path, 1)
    on_four = dist.spawn(load, args=(path, 4), nprocs=4)[0]
    print(f"sharded={sharded}: files {sorted(os.listdir(path))}")
    print(f"  same weights on 1 rank: {(on_one == saved).all()}, on a 2x2 mesh: {(on_four == saved).all()}")
    # model[0].weight on disk: one file, or the pieces of ranks 0 and 1 (it was split(0) over 2 ranks)
    files = ["s0.r0.npy", "s0.r1.npy"] if sharded else ["t0.npy"]
    on_disk = np.concatenate([np.load(os.path.join(path, name), allow_pickle=False) for name in files])
    assert np.array_equal(on_disk, saved)
    assert np.array_equal(on_one, saved) and np.array_equal(on_four, saved)
