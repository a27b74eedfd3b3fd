"""Attention and transformer layers against numpy, and the same numbers with heads and
feed-forward split Megatron's way or the batch split, on 2 ranks."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.nn.functional as F
from conftest import run_ranks

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast


def _np_sdpa(q, k, v, allowed=None, causal=False):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    keep = np.ones(scores.shape, bool)
    if causal:
        keep &= np.tril(np.ones(scores.shape[-2:], bool))
    if allowed is not None:
        keep &= allowed
    scores = np.where(keep, scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal,padded", [(False, False), (True, False), (False, True), (True, True)])
def test_sdpa_values_and_gradient_against_numpy(causal, padded):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 4, 5)) for _ in range(3))
    allowed = np.ones((2, 1, 1, 4), bool)
    allowed[1, ..., 3] = False  # the second sequence's last key is padding
    mask = gt.tensor(allowed) if padded else None
    want = _np_sdpa(q, k, v, allowed if padded else None, causal)
    qt = gt.tensor(q).requires_grad_()
    out = F.scaled_dot_product_attention(qt, gt.tensor(k), gt.tensor(v), attn_mask=mask, is_causal=causal)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    out.sum().backward()
    eps, numeric = 1e-6, np.zeros_like(q)
    for i in np.ndindex(q.shape):
        up, down = q.copy(), q.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (_np_sdpa(up, k, v, allowed if padded else None, causal).sum()
                      - _np_sdpa(down, k, v, allowed if padded else None, causal).sum()) / (2 * eps)
    np.testing.assert_allclose(qt.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_float_mask_is_added_to_the_scores():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    bias = rng.standard_normal((3, 3))
    got = F.scaled_dot_product_attention(gt.tensor(q), gt.tensor(k), gt.tensor(v), attn_mask=gt.tensor(bias))
    scores = q @ np.swapaxes(k, -1, -2) / 2 + bias
    w = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got.numpy(), (w / w.sum(-1, keepdims=True)) @ v, rtol=1e-10)


def test_multi_head_attention_against_numpy():
    gt.manual_seed(0)
    m = nn.MultiHeadAttention(8, 2)
    x = np.random.default_rng(3).standard_normal((3, 5, 8)).astype(np.float32)
    p = {name: t.numpy() for name, t in m.state_dict().items()}

    def proj(name, a):
        return a @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def heads(a):
        return a.reshape(3, 5, 2, 4).transpose(0, 2, 1, 3)

    att = _np_sdpa(heads(proj("q_proj", x)), heads(proj("k_proj", x)), heads(proj("v_proj", x)), causal=True)
    want = proj("out_proj", att.transpose(0, 2, 1, 3).reshape(3, 5, 8))
    np.testing.assert_allclose(m(gt.tensor(x), is_causal=True).numpy(), want, rtol=1e-5, atol=1e-6)


def _encoder(layout, norm_first=False):
    """A 2-layer encoder's output and gradients on `layout`: local, DP (batch split) or TP (heads
    and feed-forward split, Megatron)."""
    gt.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=norm_first)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    x = gt.randn(4, 6, 8)
    pad = gt.tensor(np.array([[False] * 6, [False] * 4 + [True] * 2, [False] * 6, [False] * 5 + [True]]))
    if layout != "local":
        placement = gt.placement("cpu", [0, 1])
        enc.to_global(placement, B)
        x, pad = x.to_global(placement, B), pad.to_global(placement, B)
        if layout == "dp":
            x, pad = x.to_global(sbp=S0), pad.to_global(sbp=S0)
        else:
            for blk in enc.layers:
                attn = blk.self_attn
                for lin in (attn.q_proj, attn.k_proj, attn.v_proj, blk.linear1):  # column parallel
                    lin.weight = nn.Parameter(lin.weight.to_global(sbp=S0))
                    lin.bias = nn.Parameter(lin.bias.to_global(sbp=S0))
                for lin in (attn.out_proj, blk.linear2):  # row parallel
                    lin.weight = nn.Parameter(lin.weight.to_global(sbp=S1))
    out = enc(x, src_key_padding_mask=pad, is_causal=True)
    (out * out).sum().backward()
    return out.numpy(), {name: p.grad.numpy() for name, p in enc.named_parameters()}


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_on_two_ranks_dp_and_tp_equals_one_process(norm_first):
    want_out, want_grads = _encoder("local", norm_first)
    assert not np.isnan(want_out).any()
    for layout in ("dp", "tp"):
        for out, grads in run_ranks(_encoder, 2, layout, norm_first):
            np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-5, err_msg=layout)
            for name in want_grads:
                np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-3, atol=1e-5,
                                           err_msg=f"{layout}: {name}")


def test_encoder_layers_are_copies_and_take_sequence_first_inputs():
    gt.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2)
    a, b = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert a is not b and np.array_equal(a.numpy(), b.numpy())
    x = gt.randn(5, 3, 8)  # (seq, batch, features): batch_first=False, PyTorch's default
    first = enc(x)
    enc_bf = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2)
    enc_bf.load_state_dict(enc.state_dict())
    np.testing.assert_allclose(np.swapaxes(enc_bf(gt.tensor(np.swapaxes(x.numpy(), 0, 1).copy())).numpy(), 0, 1),
                               first.numpy(), rtol=1e-5, atol=1e-6)


def _np_layer_norm(x, w, b, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _np_mha(p, prefix, q_in, kv_in, heads, causal):
    def proj(name, a):
        return a @ p[f"{prefix}.{name}.weight"].T + p[f"{prefix}.{name}.bias"]

    def split(a):
        b, n, e = a.shape
        return a.reshape(b, n, heads, e // heads).transpose(0, 2, 1, 3)

    att = _np_sdpa(split(proj("q_proj", q_in)), split(proj("k_proj", kv_in)), split(proj("v_proj", kv_in)),
                   causal=causal)
    b, h, n, d = att.shape
    return proj("out_proj", att.transpose(0, 2, 1, 3).reshape(b, n, h * d))


def test_decoder_layer_against_numpy():
    gt.manual_seed(0)
    dec = nn.TransformerDecoderLayer(8, 2, 16, 0.0, batch_first=True)
    rng = np.random.default_rng(5)
    tgt, mem = rng.standard_normal((3, 4, 8)).astype(np.float32), rng.standard_normal((3, 6, 8)).astype(np.float32)
    p = {k: v.numpy() for k, v in dec.state_dict().items()}
    x = _np_layer_norm(tgt + _np_mha(p, "self_attn", tgt, tgt, 2, True), p["norm1.weight"], p["norm1.bias"])
    x = _np_layer_norm(x + _np_mha(p, "multihead_attn", x, mem, 2, False), p["norm2.weight"], p["norm2.bias"])
    ff = np.maximum(x @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + p["linear2.bias"]
    want = _np_layer_norm(x + ff, p["norm3.weight"], p["norm3.bias"])
    got = dec(gt.tensor(tgt), gt.tensor(mem), tgt_is_causal=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_heads_that_do_not_divide_over_the_ranks_say_so():
    assert run_ranks(_three_heads, 2)[0].startswith("split_heads: this rank's piece has")


def _three_heads():
    m = nn.MultiHeadAttention(6, 3).to_global(gt.placement("cpu", [0, 1]), B)
    m.q_proj.weight = nn.Parameter(m.q_proj.weight.to_global(sbp=S0))
    m.q_proj.bias = nn.Parameter(m.q_proj.bias.to_global(sbp=S0))
    try:
        m(gt.randn(2, 4, 6).to_global(gt.placement("cpu", [0, 1]), B))
    except ValueError as e:
        return str(e)
    return "no error"


def _sdpa_both_ways(q, k, v, mask=None, causal=False, scale=None):
    """(values, gradients of q, k, v) of the fused primitive and of the composite (its fallback)."""
    from globaltensor.nn import attention
    rng = np.random.default_rng(9)
    weight = None
    results = []
    for fn in (attention.scaled_dot_product_attention, attention._composite_attention):
        ts = [gt.tensor(a).requires_grad_() for a in (q, k, v)]
        out = fn(*ts, attn_mask=None if mask is None else gt.tensor(mask), is_causal=causal, scale=scale)
        if weight is None:
            weight = rng.standard_normal(tuple(out.shape))
        with np.errstate(invalid="ignore"):
            (out * gt.tensor(weight)).sum().backward()
        results.append((out.numpy(), [t.grad.numpy() for t in ts]))
    return results


@pytest.mark.parametrize("lq,lk,causal,mask", [
    (4, 4, False, None), (4, 4, True, None), (3, 6, True, None), (6, 3, True, None), (3, 6, False, "bool"),
    (5, 4, True, "bool"), (3, 6, True, "float"), (4, 4, False, "float_heads"), (5, 4, True, "bool_none")])
def test_fused_attention_equals_the_composite(lq, lk, causal, mask):
    """The primitive gives the composite's values and gradients (float64, 1e-6), is_causal with
    Lq != Lk included (top-left aligned, as PyTorch: row i sees keys j <= i); rows that see no key
    (a bool mask taking every key of a batch) give nan as the composite's softmax."""
    rng = np.random.default_rng(lq * 10 + lk)
    q, k, v = rng.standard_normal((2, 3, lq, 5)), rng.standard_normal((2, 3, lk, 5)), rng.standard_normal((2, 3, lk, 4))
    m = {None: None, "bool": rng.uniform(size=(2, 1, 1, lk)) > 0.3, "bool_none": rng.uniform(size=(2, 1, 1, lk)) > 0.3,
         "float": rng.standard_normal((lq, lk)), "float_heads": rng.standard_normal((3, lq, lk))}[mask]
    if mask in ("bool", "bool_none"):
        m[..., 0] = True  # every row keeps a key ...
    if mask == "bool_none":
        m[1] = False  # ... but batch 1's
    with np.errstate(invalid="ignore"):
        (fused, fused_grads), (composite, composite_grads) = _sdpa_both_ways(q, k, v, m, causal, 0.6)
    np.testing.assert_allclose(fused, composite, rtol=1e-6, atol=1e-6)
    assert np.isnan(fused).any() == (mask == "bool_none")
    for got, want in zip(fused_grads, composite_grads):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _count_kernels(monkeypatch, names):
    """{op name: how many times its kernel ran}, filled in as ops run."""
    from globaltensor.registry import REGISTRY
    calls = {}
    for name in names:
        def counted(*args, _name=name, _kernel=REGISTRY[name].kernel, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _kernel(*args, **kwargs)
        monkeypatch.setattr(REGISTRY[name], "kernel", counted)
    return calls


def test_a_gpt_block_runs_attention_as_one_primitive(monkeypatch):
    """A GPT-like block (pre-norm, causal, padding mask) issues one "attention" op forward and one
    "attention_backward" backward, and none of the composite's softmax / masked fill."""
    calls = _count_kernels(monkeypatch, ("attention", "attention_backward", "softmax", "where"))
    gt.manual_seed(0)
    block = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
    x = gt.randn(3, 5, 8)
    pad = gt.tensor(np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]]))
    out = block(x, src_key_padding_mask=pad, is_causal=True)
    assert calls == {"attention": 1}
    out.sum().backward()
    assert calls == {"attention": 1, "attention_backward": 1}
    assert block.self_attn.q_proj.weight.grad is not None


def test_dropout_and_a_mask_that_needs_a_gradient_take_the_composite(monkeypatch):
    calls = _count_kernels(monkeypatch, ("attention", "softmax"))
    q = gt.tensor(np.random.default_rng(4).standard_normal((1, 2, 3, 4)))
    mask = gt.zeros(3, 3, dtype=gt.float64).requires_grad_()
    F.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum().backward()
    assert mask.grad is not None and calls == {"softmax": 1}
    gt.manual_seed(0)
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert calls == {"softmax": 2}
    F.scaled_dot_product_attention(q, q, q, attn_mask=mask.detach())
    assert calls == {"softmax": 2, "attention": 1}


def _query_rows_split(q, k, v):
    """Causal attention with the query rows split over 2 ranks (k, v broadcast): each rank's
    causal mask is placed by its piece's offset along Lq. Output and gradients, gathered."""
    placement = gt.placement("cpu", [0, 1])
    qt = gt.tensor(q).to_global(placement, B).to_global(sbp=gt.sbp.split(2)).requires_grad_()
    kt, vt = (gt.tensor(a).to_global(placement, B).requires_grad_() for a in (k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    sbp = out.sbp
    (out * out).sum().backward()
    grads = [t.grad.to_global(sbp=B).to_local().numpy() for t in (qt, kt, vt)]
    return sbp, out.to_global(sbp=B).to_local().numpy(), grads


def test_query_rows_split_over_two_ranks_equals_one_process():
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((2, 2, 6, 4)), rng.standard_normal((2, 2, 8, 4)), rng.standard_normal((2, 2, 8, 3))
    ts = [gt.tensor(a).requires_grad_() for a in (q, k, v)]
    want = F.scaled_dot_product_attention(*ts, is_causal=True)
    (want * want).sum().backward()
    for sbp, out, grads in run_ranks(_query_rows_split, 2, q, k, v):
        assert sbp == (gt.sbp.split(2),)
        np.testing.assert_allclose(out, want.numpy(), rtol=1e-10, atol=1e-12)
        for got, t in zip(grads, ts):
            np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-10, atol=1e-12)
