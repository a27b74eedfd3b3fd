"""Issue 35 (s14): an embedding's gradient on a data-parallel step stays partial and goes into the
gradient bucket with the rest: one all_reduce a step, no gather of the indices, no reduce_scatter
then all_gather for the position table; values against torch, on 1-D and 2-D meshes."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

B, P, S0 = gt.sbp.broadcast, gt.sbp.partial_sum, gt.sbp.split(0)
VOCAB, SEQ, DIM, BATCH = 11, 6, 4, 6  # BATCH over 2 ranks; SEQ not a multiple of anything in particular


def _tables():
    rng = np.random.default_rng(7)
    return (rng.standard_normal((VOCAB, DIM)).astype(np.float32), rng.standard_normal((SEQ, DIM)).astype(np.float32),
            rng.integers(0, VOCAB, (BATCH, SEQ)), rng.standard_normal((BATCH, SEQ, DIM)).astype(np.float32))


def _dp_step(mesh_shape):
    """Token + position embeddings of a batch split over the ranks (a GPT's first layer), a
    weighted sum as the loss; the collectives of backward, and the tables' gradients."""
    tok_np, pos_np, idx_np, w_np = _tables()
    ranks = np.arange(2).reshape(mesh_shape).tolist()
    mesh = gt.placement("cpu", ranks)
    whole = (B,) * mesh.ndim
    data = (S0,) + (B,) * (mesh.ndim - 1)
    tok = gt.nn.Embedding(VOCAB, DIM)
    pos = gt.nn.Embedding(SEQ, DIM)
    with gt.no_grad():
        tok.weight.copy_(gt.tensor(tok_np))
        pos.weight.copy_(gt.tensor(pos_np))
    model = gt.nn.ModuleList([tok, pos]).to_global(mesh, whole)
    idx = gt.tensor(idx_np).to_global(mesh, whole).to_global(sbp=data)
    w = gt.tensor(w_np).to_global(mesh, whole).to_global(sbp=data)
    results = []
    for _ in range(3):  # mixed layouts: the same plan every time
        x = tok(idx) + pos(gt.arange(SEQ, placement=mesh, sbp=whole))
        loss = (x * w).sum()
        with gt.debug.count_collectives() as counted:
            loss.backward()
        results.append((dict(counted), model[0].weight.grad.numpy(), model[1].weight.grad.numpy(),
                        model[0].weight.grad.sbp, model[1].weight.grad.sbp))
        for p in model.parameters():
            p.grad = None
    return results


def _torch_grads():
    tok_np, pos_np, idx_np, w_np = _tables()
    tok = torch.tensor(tok_np, requires_grad=True)
    pos = torch.tensor(pos_np, requires_grad=True)
    x = torch.nn.functional.embedding(torch.tensor(idx_np), tok) + pos[torch.arange(SEQ)]
    (x * torch.tensor(w_np)).sum().backward()
    return tok.grad.numpy(), pos.grad.numpy()


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 1)])
def test_embedding_gradients_join_the_bucket(mesh_shape):
    want_tok, want_pos = _torch_grads()
    for per_rank in run_ranks(_dp_step, 2, mesh_shape):
        for counted, tok_grad, pos_grad, tok_sbp, pos_sbp in per_rank:
            assert counted == {"all_reduce": 1}, counted  # both tables in one bucket: nothing else
            assert tuple(tok_sbp) == tuple(pos_sbp) == (B,) * len(mesh_shape)
            np.testing.assert_allclose(tok_grad, want_tok, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(pos_grad, want_pos, rtol=1e-6, atol=1e-6)


def _index_add_split():
    """index_add with the indices and the source rows split alike: each rank adds its own rows, no
    gather of the indices; the sum of the pieces against np.add.at."""
    rng = np.random.default_rng(3)
    idx_np, src_np = rng.integers(0, 5, 9), rng.standard_normal((9, 3)).astype(np.float32)
    mesh = gt.placement("cpu", [0, 1])
    x = gt.zeros(5, 3, placement=mesh, sbp=B)
    idx = gt.tensor(idx_np).to_global(mesh, B).to_global(sbp=S0)  # 9 rows: uneven pieces
    src = gt.tensor(src_np).to_global(mesh, B).to_global(sbp=S0)
    from globaltensor.ops._front import apply
    with gt.debug.count_collectives() as counted:
        out = apply("index_add", [x, idx, src], {"dim": 0, "size": 5})  # the primitive (embedding's backward)
    return dict(counted), tuple(out.sbp), out.to_global(sbp=B).numpy(), idx_np, src_np


def test_index_add_of_split_rows_is_partial():
    for counted, sbp, value, idx_np, src_np in run_ranks(_index_add_split, 2):
        assert counted == {} and sbp == (P,)
        want = np.zeros((5, 3), np.float32)
        np.add.at(want, idx_np, src_np)
        np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)
