"""Issue 35 (s5) kernels: the one-pass Adam / AdamW update against numpy's passes (bits) and torch."""
import numpy as np
import pytest
import torch

from globaltensor.optim import updates


def _numpy_adam(w, g, m, v, vmax, lr, step, b1, b2, eps, wd, decoupled):
    """The numpy passes the kernel replaces, in their order (the twin of the bits)."""
    if wd:
        if decoupled:
            w *= 1 - lr * wd
        else:
            g = g + wd * w
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
        v = vmax
    denom = np.sqrt(v / (1 - b2 ** step)) + eps
    w -= (lr / (1 - b1 ** step) * m / denom).astype(w.dtype, copy=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decoupled, wd, amsgrad", [(False, 0.0, False), (False, 0.1, True), (True, 0.01, False),
                                                    (True, 0.05, True)])
def test_adam_update_has_numpy_bits(dtype, decoupled, wd, amsgrad):
    rng = np.random.default_rng(3)
    n = 10_007
    w0 = rng.standard_normal(n).astype(dtype)
    ours = [w0.copy(), np.zeros(n, dtype), np.zeros(n, dtype), np.zeros(n, dtype)]
    twin = [a.copy() for a in ours]
    kernel = updates.adamw_update if decoupled else updates.adam_update
    for step in range(1, 4):
        g = rng.standard_normal(n).astype(dtype)
        g[:3] = 0.0
        g[7 * step] = np.nan  # propagates as numpy's (amsgrad's maximum included)
        w, m, v, vmax = ours
        kernel(w, g, m, v, *([vmax] if amsgrad else []), 0.01, step, betas=(0.9, 0.999), eps=1e-8,
                      weight_decay=wd, amsgrad=amsgrad)
        tw, tm, tv, tvmax = twin
        _numpy_adam(tw, g, tm, tv, tvmax if amsgrad else None, 0.01, step, 0.9, 0.999, 1e-8, wd, decoupled)
    for a, b in zip(ours, twin):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_adamw_matches_torch_and_a_strided_piece_takes_the_numpy_path():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.AdamW([tw], lr=0.01, weight_decay=0.05, amsgrad=True)
    w, m, v, vmax = w0.copy(), *(np.zeros_like(w0) for _ in range(3))
    wt = np.zeros((5, 6), np.float32).T  # the same update on a transposed (not C-contiguous) piece: numpy's passes
    wt[...] = w0
    mt, vt, vmaxt = (np.zeros((5, 6), np.float32).T for _ in range(3))
    for step, g in enumerate(grads, 1):
        tw.grad = torch.tensor(g)
        topt.step()
        kw = dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05, amsgrad=True)
        updates.adamw_update(w, g, m, v, vmax, 0.01, step, **kw)
        updates.adamw_update(wt, g, mt, vt, vmaxt, 0.01, step, **kw)
    np.testing.assert_allclose(w, tw.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert np.array_equal(w, wt)
