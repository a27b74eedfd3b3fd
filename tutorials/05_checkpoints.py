# %% [markdown]
# # 05 · Checkpoints
#
# `gt.save(obj, path, global_dst_rank=0)` gathers global tensors and writes them from one rank
# into one file, as OneFlow and PyTorch do (a pickle of any object: a state dict, a whole module;
# without `global_dst_rank` a global tensor raises, as in OneFlow). `gt.load(path)` reads it on
# every rank (`global_src_rank=0`: one rank reads and hands the bytes to all); `load_state_dict`
# lays the values out by each parameter's placement and SBP, so a checkpoint saved under one
# layout loads under any other. `save_as_external_data=True` writes a directory instead: the
# pickle plus one `.npy` file a tensor. Writes go to a temporary name and are renamed at the end:
# an interrupted save leaves the previous checkpoint intact. `sharded=True` skips the gather:
# each rank writes its pieces, and loading reads only the slices each rank needs.
#
# Checked below for the three kinds: the weights loaded on one rank and on a 2x2 mesh (where the
# weight keeps its `(S1, B)` layout) equal the saved ones exactly (loading only moves data), and
# where the checkpoint has `.npy` files, the weight read back with plain `np.load` (no pickle) is
# the saved one, whole or as rank 0's and rank 1's rows.

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


def save(path, kind):
    gt.manual_seed(0)
    model = model_on(gt.placement.all("cpu"), S0)
    if kind == "sharded":
        gt.save(model.state_dict(), path, sharded=True)
    else:
        gt.save(model.state_dict(), path, global_dst_rank=0, save_as_external_data=kind == "external")
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


for kind in ("file", "external", "sharded"):
    path = os.path.join(folder, kind)
    saved = dist.spawn(save, args=(path, kind), nprocs=2)[0]
    on_one = load(path, 1)
    on_four = dist.spawn(load, args=(path, 4), nprocs=4)[0]
    print(f"{kind}: {'a file' if os.path.isfile(path) else f'files {sorted(os.listdir(path))}'}")
    print(f"  same weights on 1 rank: {(on_one == saved).all()}, on a 2x2 mesh: {(on_four == saved).all()}")
    assert np.array_equal(on_one, saved) and np.array_equal(on_four, saved)
    # model[0].weight on disk: one .npy file, or the pieces of ranks 0 and 1 (split(0) over 2 ranks)
    files = {"external": ["tensor_0.npy"], "sharded": ["s0.r0.npy", "s0.r1.npy"]}.get(kind, [])
    if files:
        on_disk = np.concatenate([np.load(os.path.join(path, name), allow_pickle=False) for name in files])
        assert np.array_equal(on_disk, saved)
