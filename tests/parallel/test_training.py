"""Training on global tensors: the same seeded script gives the same losses on 1 rank, 2 ranks
data-parallel, 2 ranks tensor-parallel and a 2x2 mesh; checkpoints load under any layout."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def _layout(model, mode, kind="cpu"):
    """Put the model and pick the data layout for a parallel mode (on cpu or cuda placements)."""
    k = gt.env.get_world_size()
    if mode == "local":
        return None, None
    if mode == "2d":
        mesh = gt.placement(kind, [[0, 1], [2, 3]])
        model.to_global(mesh, (B, B))
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=(B, S0)))  # columns over axis 1
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=(B, S0)))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=(B, S1)))  # rows over axis 1
        return mesh, (S0, B)                                                        # batch over axis 0
    placement = gt.placement(kind, list(range(k)))
    model.to_global(placement, B)
    if mode == "tp":  # Megatron: net1 column-parallel, net2 row-parallel
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=S0))
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=S0))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=S1))
        return placement, B
    return placement, S0


def _train(mode, optimizer="sgd", steps=6):
    gt.manual_seed(0)
    model = ToyModel()
    placement, data_sbp = _layout(model, mode)
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd" else \
        gt.optim.AdamW(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    kwargs = {} if placement is None else {"placement": placement, "sbp": data_sbp}
    losses = []
    for _ in range(steps):
        x = gt.randn(40, 10, **kwargs)
        y = gt.randn(40, 16, **kwargs)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_losses_agree_across_layouts(optimizer):
    want = _train("local", optimizer)
    assert want[-1] < want[0]
    for mode, nprocs in (("dp", 2), ("tp", 2), ("2d", 4)):
        got = run_ranks(_train, nprocs, mode, optimizer)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{mode} on {nprocs} ranks")


def _save(path):
    gt.manual_seed(1)
    model = ToyModel()
    _layout(model, "tp")
    gt.save(model.state_dict(), path, global_dst_rank=0)
    return {k: v.numpy().tolist() for k, v in model.state_dict().items()}


def _load(path, mode, kind="cpu"):
    gt.manual_seed(2)  # a different initialisation, overwritten by the checkpoint
    model = ToyModel()
    _layout(model, mode, kind)
    model.load_state_dict(gt.load(path, global_src_rank=0))
    return {k: v.numpy().tolist() for k, v in model.state_dict().items()}


def test_checkpoint_saved_on_two_ranks_loads_on_one_and_four(tmp_path):
    path = str(tmp_path / "ck")
    saved = run_ranks(_save, 2, path)[0]
    assert _load(path, "local") == saved
    assert run_ranks(_load, 4, path, "2d")[0] == saved
    assert run_ranks(_load, 4, path, "dp")[3] == saved


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "ck")
    gt.save({"w": gt.tensor([1.0, 2.0])}, path)
    from globaltensor.serialization import directory

    def broken(*args, **kwargs):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(directory, "_synced", broken)  # the data is written, not yet in place
    with pytest.raises(OSError, match="simulated"):
        gt.save({"w": gt.tensor([3.0, 4.0])}, path)
    monkeypatch.undo()
    assert gt.load(path)["w"].numpy().tolist() == [1.0, 2.0]
    assert [n for n in __import__("os").listdir(tmp_path) if n != "ck"] == []  # no temporary left


def _bucket_counts(kind="cpu"):
    placement = gt.placement(kind, [0, 1])
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to_global(placement, B)
    x = gt.randn(8, 16, placement=placement, sbp=S0)
    loss_fn = nn.MSELoss()
    y = gt.randn(8, 8, placement=placement, sbp=S0)
    counts = {}
    with gt.debug.count_collectives() as c:
        loss_fn(model(x), y).backward()              # 4 parameters, one bucket
    counts["one bucket"] = dict(c)
    model.zero_grad()
    gt.distributed.set_bucket_size(32 * 16 * 4 / 2**20)  # room for one weight at a time
    with gt.debug.count_collectives() as c:
        loss_fn(model(x), y).backward()
    counts["small buckets"] = dict(c)
    gt.distributed.set_bucket_size(25)
    model.zero_grad()
    with model.no_sync():
        with gt.debug.count_collectives() as c:
            loss_fn(model(x), y).backward()          # accumulate, no communication
            loss_fn(model(x), y).backward()
        counts["no_sync"] = dict(c)
    accumulated = [p.grad.sbp for p in model.parameters()]
    with gt.debug.count_collectives() as c:
        loss_fn(model(x), y).backward()              # reduces all three steps at once
    counts["after no_sync"] = dict(c)
    grads = [p.grad.numpy() for p in model.parameters()]
    return counts, accumulated, [p.grad.sbp for p in model.parameters()], grads


@pytest.mark.parametrize("kind, env", [("cpu", None), ("cuda", {"GLOBALTENSOR_CUDA_SIMULATE": "1"}),
                                       pytest.param("cuda", None, marks=pytest.mark.cuda, id="cuda-gpu")])
def test_gradient_buckets_and_no_sync(kind, env):
    counts, accumulated, final, grads = run_ranks(_bucket_counts, 2, kind, env=env)[0]
    assert counts["one bucket"] == {"all_reduce": 1}
    assert counts["small buckets"]["all_reduce"] >= 3
    assert counts["no_sync"] == {}
    assert counts["after no_sync"] == {"all_reduce": 1}
    assert all(s == (gt.sbp.partial_sum,) for s in accumulated) and all(s == (B,) for s in final)
    gt.manual_seed(0)  # the same three backward passes in one process
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x, y = gt.randn(8, 16), gt.randn(8, 8)
    for _ in range(3):
        nn.MSELoss()(model(x), y).backward()
    for got, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def _loader_batches(shuffle):
    k = gt.env.get_world_size()
    data = np.arange(50, dtype=np.float32).reshape(25, 2)
    labels = np.arange(25, dtype=np.int64)
    ds = gt.utils.data.TensorDataset(data, labels)
    gt.manual_seed(5)
    if k == 1:
        loader = gt.utils.data.DataLoader(ds, batch_size=8, shuffle=shuffle)
    else:
        loader = gt.utils.data.DataLoader(ds, batch_size=8, shuffle=shuffle, placement=gt.placement.all("cpu"),
                                          sbp=S0)
    return [(x.numpy().tolist(), y.numpy().tolist(), x.to_local().shape[0]) for x, y in loader]


@pytest.mark.parametrize("shuffle", [False, True])
def test_sharded_loader_gives_one_process_batches(shuffle):
    want = _loader_batches(shuffle)
    for nprocs in (2, 3):
        results = run_ranks(_loader_batches, nprocs, shuffle)
        for rank_batches in results:
            assert [b[:2] for b in rank_batches] == [w[:2] for w in want]
        assert sum(b[2] for b in results[0]) < sum(w[2] for w in want)  # each rank read only its rows


def _row_split_embedding():
    placement = gt.placement.all("cpu")
    gt.manual_seed(3)
    table = nn.Embedding(11, 4).to_global(placement, B)
    table.weight = nn.Parameter(table.weight.to_global(sbp=S0))   # rows split: model parallel
    ids = gt.tensor(np.array([[0, 5, 10], [3, 3, 7]]), placement=placement, sbp=B)
    with gt.debug.count_collectives() as c:
        out = table(ids)
    partial = (out.sbp, dict(c))
    (out * gt.arange(4, dtype=gt.float32, placement=placement, sbp=B)).sum().backward()
    return partial, out.numpy(), table.weight.grad.numpy(), table.weight.grad.sbp


def test_row_split_embedding_is_partial_and_exact():
    gt.manual_seed(3)
    local = nn.Embedding(11, 4)
    ids = gt.tensor(np.array([[0, 5, 10], [3, 3, 7]]))
    want = local(ids)
    (want * gt.arange(4, dtype=gt.float32)).sum().backward()
    for nprocs in (2, 3):
        (sbp, counts), value, grad, grad_sbp = run_ranks(_row_split_embedding, nprocs)[0]
        assert sbp == (gt.sbp.partial_sum,) and counts == {}
        np.testing.assert_allclose(value, want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(grad, local.weight.grad.numpy(), rtol=1e-6)
        assert grad_sbp == (S0,)


def _save_sharded(path, kind="cpu"):
    gt.manual_seed(4)
    model = ToyModel()
    _layout(model, "2d", kind)
    gt.save(model.state_dict(), path, sharded=True)
    import os
    return {k: v.numpy().tolist() for k, v in model.state_dict().items()}, sorted(os.listdir(path))


def test_sharded_checkpoint_loads_under_other_layouts(tmp_path):
    path = str(tmp_path / "sharded")
    saved, files = run_ranks(_save_sharded, 4, path)[0]
    # weights are B along mesh axis 0: the ranks of coordinate 0 there (0 and 1) hold distinct pieces
    assert "tree.json" in files and any(f.endswith(".r1.npy") for f in files)
    assert not any(f.endswith((".r2.npy", ".r3.npy")) for f in files)
    assert _load(path, "local") == saved
    assert run_ranks(_load, 2, path, "tp")[1] == saved
    assert run_ranks(_load, 3, path, "dp")[2] == saved


@pytest.mark.parametrize("env", [{"GLOBALTENSOR_CUDA_SIMULATE": "1"},
                                 pytest.param(None, marks=pytest.mark.cuda, id="gpu")])
def test_checkpoints_move_between_cpu_and_cuda(tmp_path, env):
    """Saved sharded from a 2x2 cuda mesh, loaded on cpu (tensor parallel) and on cuda (data parallel)."""
    path = str(tmp_path / "sharded")
    saved, _ = run_ranks(_save_sharded, 4, path, "cuda", env=env)[0]
    assert run_ranks(_load, 2, path, "tp", "cpu", env=env)[1] == saved
    assert run_ranks(_load, 3, path, "dp", "cuda", env=env)[2] == saved
    assert _load(path, "local") == saved


def _data_parallel_wrapper():
    rank, k = gt.env.get_rank(), gt.env.get_world_size()
    gt.manual_seed(rank)  # different inits: the wrapper makes rank 0's win
    model = gt.distributed.DataParallel(ToyModel())
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x_all, y_all = rng.standard_normal((8, 10)), rng.standard_normal((8, 16))
    x = gt.tensor(x_all[rank * 8 // k:(rank + 1) * 8 // k])
    y = gt.tensor(y_all[rank * 8 // k:(rank + 1) * 8 // k])
    for _ in range(3):
        nn.MSELoss()(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    with model.no_sync(), gt.debug.count_collectives() as c:
        nn.MSELoss()(model(x), y).backward()
    return [p.numpy().tolist() for p in model.parameters()], dict(c)


def test_data_parallel_wrapper_matches_one_process():
    results = run_ranks(_data_parallel_wrapper, 2)
    assert results[0][0] == results[1][0] and results[0][1] == {}
    gt.manual_seed(0)
    model = ToyModel()
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x, y = gt.tensor(rng.standard_normal((8, 10))), gt.tensor(rng.standard_normal((8, 16)))
    for _ in range(3):
        nn.MSELoss()(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    for got, p in zip(results[0][0], model.parameters()):
        np.testing.assert_allclose(got, p.numpy(), rtol=1e-6, atol=1e-7)


def _accumulate_without_zero_grad():
    placement = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    model = nn.Linear(4, 3).to_global(placement, B)
    x = gt.randn(6, 4, placement=placement, sbp=S0)
    model(x).sum().backward()
    once = model.weight.grad.numpy()
    model(x).sum().backward()  # no zero_grad: the gradients add up
    return once, model.weight.grad.numpy(), model.weight.grad.sbp


def test_gradients_accumulate_across_backward_calls():
    once, twice, sbp = run_ranks(_accumulate_without_zero_grad, 2)[0]
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-6)
    assert sbp == (B,)


def _module_from_local_slices():
    """Module.to_global applies Tensor.to_global's rule to local parameters and buffers (SPEC §3):
    split pieces concatenate, broadcast takes the first rank's values, partial_sum adds up."""
    r = gt.env.get_rank()
    pl = gt.placement("cpu", [0, 1])
    shapes = {}
    for sbp in (S0, B, gt.sbp.partial_sum):
        layer = nn.Linear(3, 2)
        layer.weight = nn.Parameter(gt.tensor(np.full((2, 3), r + 1.0, np.float32)))
        layer.register_buffer("steps", gt.tensor(np.array([r + 1.0], np.float32)))
        layer.to_global(pl, sbp)
        shapes[str(sbp)] = (tuple(layer.weight.shape), tuple(layer.weight.to_local().shape),
                            layer.weight.numpy()[:, 0].tolist(), layer.steps.numpy().tolist(),
                            layer.weight.requires_grad)
    return shapes


def test_module_to_global_takes_local_parameters_as_this_ranks_component():
    got = run_ranks(_module_from_local_slices, 2)
    assert got[0] == got[1]
    assert got[0][str(S0)] == ((4, 3), (2, 3), [1.0, 1.0, 2.0, 2.0], [1.0, 2.0], True)
    assert got[0][str(B)] == ((2, 3), (2, 3), [1.0, 1.0], [1.0], True)
    assert got[0][str(gt.sbp.partial_sum)] == ((2, 3), (2, 3), [3.0, 3.0], [3.0], True)
