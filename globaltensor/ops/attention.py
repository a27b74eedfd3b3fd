"""Fused scaled dot-product attention: "attention" (out, weights) and "attention_backward" (dq, dk, dv) primitives."""
import functools

import numpy as np

from .. import _native
from ..backends.devices import array_module
from ..registry import rules
from ._front import apply, c_floats
from ..registry import op

B, P, S = rules.B, rules.P, rules.split


# --- forward ---------------------------------------------------------------------------------

def _np(d):
    return np.dtype(getattr(d, "np", d))


def _check(s, dt):
    """(the weights' shape [..., Lq, Lk], the output's [..., Lq, Ev]) of q [..., Lq, E], k [..., Lk, E],
    v [..., Lk, Ev] of one batch shape and floating dtype, and a mask (bool or q's dtype)
    broadcastable to [..., Lq, Lk]; ValueError / TypeError when they do not fit."""
    q, k, v = (tuple(x) for x in s[:3])
    if len(q) < 2 or len(k) != len(q) or len(v) != len(q):
        raise ValueError(f"attention: q {q}, k {k}, v {v} need one number (>= 2) of dims")
    if q[:-2] != k[:-2] or q[:-2] != v[:-2] or q[-1] != k[-1] or k[-2] != v[-2]:
        raise ValueError(f"attention: q {q} [..., Lq, E], k {k} [..., Lk, E] and v {v} [..., Lk, Ev] do not fit")
    if any(_np(d).kind != "f" for d in dt[:3]) or len({_np(d) for d in dt[:3]}) != 1:
        raise TypeError(f"attention: q, k, v must share one floating dtype, got {[_np(d) for d in dt[:3]]}")
    scores = q[:-1] + (k[-2],)
    if len(s) == 4:
        m = tuple(s[3])
        if len(m) > len(scores) or rules.broadcast_shape([scores, m]) != scores:
            raise ValueError(f"attention: the mask {m} does not broadcast to the scores' shape {scores}")
        if _np(dt[3]) not in (np.dtype(bool), _np(dt[0])):
            raise TypeError(f"attention: the mask must be bool or of q's dtype {_np(dt[0])}, got {_np(dt[3])}")
    return scores, q[:-1] + (v[-1],)


def _attention_meta(s, dt, st):
    scores, out = _check(s, dt)
    return [out, scores], [dt[0], dt[0]]


def _mask_split(n, mask, d):
    """() without a mask; else the mask's SBP when the n-dim q is split on its dim d: split alike
    where the mask spans d (counting from the right), broadcast where it has size 1 or no such dim."""
    if mask is None:
        return ()
    a = d - (n - len(mask))
    return (S(a) if a >= 0 and mask[a] != 1 else B,)


def _attention_rows(s, o, st):
    """q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] (, mask) -> out [..., Lq, Ev], weights [..., Lq, Lk].
    all B -> B, B
    batch/head dim d split on q, k, v (mask too where it spans d) -> S(d), S(d)   heads are independent
    q's rows S(Lq), k, v B (mask S where it spans Lq) -> S(Lq), S(Lq)              each query row is
        independent (the causal mask is placed by the piece's offset along Lq)
    No P row: softmax is not linear."""
    n, mask = len(s[0]), (s[3] if len(s) == 4 else None)
    rows = [((B,) * len(s), (B, B))]
    rows += [((S(d), S(d), S(d)) + _mask_split(n, mask, d), (S(d), S(d))) for d in range(n - 2)]
    rows.append(((S(n - 2), B, B) + _mask_split(n, mask, n - 2), (S(n - 2), S(n - 2))))
    return rows


@functools.lru_cache(maxsize=64)
def _future(lq, lk, first):
    """[lq, lk] bool, True where key j comes after query row i's position: j > i + first."""
    future = np.triu(np.ones((lq, lk), bool), first + 1)
    future.flags.writeable = False
    return future


def _attention_backward(ctx, g, gw=None):
    q, k, v = ctx.inputs[:3]
    w = ctx.outputs[1]
    scale = ctx.static["scale"]
    wanted = [t.requires_grad for t in (q, k, v)]
    grads = [None, None, None]
    if g is not None:  # a bool mask (and the causal diagonal) places the scores that had -inf put in
        mask = ctx.inputs[3:] if len(ctx.inputs) == 4 and ctx.inputs[3].dtype.name == "bool" else []
        static = {key: value for key, value in ctx.static.items() if key in ("scale", "is_causal", "diagonal")}
        grads = list(apply("attention_backward", [g, q, k, v, w, *mask], static, multi=True))
    if gw is not None:  # the weights are internal (never returned), but their gradient is exact all the same
        from .linalg import matmul
        from .reduction import sum as _sum
        ds = w * (gw - _sum(gw * w, -1, keepdim=True)) * scale
        extra = (matmul(ds, k), matmul(ds.transpose(-2, -1), q), None)
        grads = [a if b is None else b if a is None else a + b for a, b in zip(grads, extra)]
    return tuple(gr if want else None for gr, want in zip(grads, wanted)) + ((None,) if len(ctx.inputs) == 4 else ())


def _first(lq, lk, diagonal, offsets, q_index):
    """The causal diagonal of this piece: query row i sees the keys j <= i + first."""
    return (lk - lq if diagonal is None else diagonal) + (0 if offsets is None else offsets[q_index][-2])


def _future_of(xp, lq, lk, is_causal, diagonal, offsets, q_index):
    """The causal [lq, lk] bool mask of this piece (True: a key after the query's position), or None;
    on a device, made there (an upload would wait for the GPU's stream)."""
    if not is_causal:
        return None
    first = _first(lq, lk, diagonal, offsets, q_index)
    return _future(lq, lk, first) if xp is np else xp.triu(xp.ones((lq, lk), bool), first + 1)


def _native_rows(*arrays):
    """Whether the C++ row passes take these pieces: C-contiguous numpy arrays of one dtype, float32/float64."""
    return c_floats(*arrays) and all(a.flags.c_contiguous for a in arrays)


@op("attention", _attention_rows, _attention_backward, meta=_attention_meta, takes_offsets=True)
def _attention(q, k, v, mask=None, scale=1.0, is_causal=False, diagonal=None, offsets=None):
    """(softmax(q k^T * scale + mask) v, the softmax weights) over the last two dims, in one pass
    of numpy per step, in place: scale (on q when it is the smaller), add the mask (a bool mask:
    -inf where it is False), -inf above the causal diagonal (keys after the query's position,
    lk - lq past its row: `diagonal`, from the global shapes; the piece's offset along Lq places
    its rows), then softmax (max, subtract, exp, sum, divide; the causal -inf, max and subtraction
    one C++ pass for float32/float64 pieces, exp and the sum numpy's, whose bits they define). A row with every key masked is
    nan, as softmax of -inf everywhere."""
    xp = array_module(q)
    lq, lk = q.shape[-2], k.shape[-2]
    if q.shape[-1] <= lk:  # q is no bigger than the scores: scale it
        scores = xp.matmul(q * q.dtype.type(scale), xp.swapaxes(k, -1, -2))
    else:
        scores = xp.matmul(q, xp.swapaxes(k, -1, -2))
        scores *= scores.dtype.type(scale)
    with np.errstate(invalid="ignore", over="ignore"):  # -inf - -inf: a row masked everywhere is nan
        if mask is not None:
            if mask.dtype == np.bool_:
                xp.copyto(scores, -np.inf, where=~mask)
            else:
                scores += mask
        if _native_rows(scores):  # the causal -inf and the max's subtraction in one C++ pass: numpy's bits
            _native.softmax_shift(scores, is_causal, _first(lq, lk, diagonal, offsets, 0) if is_causal else 0)
        else:
            future = _future_of(xp, lq, lk, is_causal, diagonal, offsets, 0)
            if future is not None:
                xp.copyto(scores, -np.inf, where=future)
            scores -= scores.max(axis=-1, keepdims=True)
        xp.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        return xp.matmul(scores, v), scores


# --- backward --------------------------------------------------------------------------------

def _attention_backward_meta(s, dt, st):
    g, q, k, v, w = (tuple(x) for x in s[:5])
    if g != q[:-1] + (v[-1],) or w != q[:-1] + (k[-2],):
        raise ValueError(f"attention_backward: g {g} or weights {w} do not fit q {q}, k {k}, v {v}")
    if len(s) == 6 and (_np(dt[5]) != np.dtype(bool) or rules.broadcast_shape([w, s[5]]) != w):
        raise ValueError(f"attention_backward: the mask must be bool and broadcast to the weights' shape {w}")
    return [q, k, v], [dt[1], dt[2], dt[3]]


def _attention_backward_rows(s, o, st):
    """g, q, k, v, w (, bool mask) -> dq, dk, dv.
    all B -> B
    batch/head dim d split on every input (the mask where it spans d) -> S(d) on every output
    rows of the queries (g, q, w S(Lq), the mask where it spans Lq; k, v B) -> dq S(Lq); dk, dv P
        (sums over the query rows)
    g P, the rest B -> P, P, P (every gradient is linear in g)"""
    n, mask = len(s[1]), (s[5] if len(s) == 6 else None)
    rows = [((B,) * len(s), (B,) * 3)]
    rows += [((S(d),) * 5 + _mask_split(n, mask, d), (S(d),) * 3) for d in range(n - 2)]
    rows.append(((S(n - 2), S(n - 2), B, B, S(n - 2)) + _mask_split(n, mask, n - 2), (S(n - 2), P, P)))
    rows.append(((P, B, B, B, B) + (B,) * (len(s) - 5), (P, P, P)))
    return rows


@op("attention_backward", _attention_backward_rows, meta=_attention_backward_meta, takes_offsets=True)
def _attention_backward_kernel(g, q, k, v, w, mask=None, scale=1.0, is_causal=False, diagonal=None, offsets=None):
    """(dq, dk, dv) of attention from the output's gradient g and the saved weights w:
    dv = w^T g; dw = g v^T; ds = w * (dw - rowsum(dw * w)); dq = ds k * scale; dk = ds^T q * scale.
    Where a row sum is not finite (a row that saw no key: nan weights), ds is 0 at the places the
    bool mask or the causal diagonal filled with -inf, as the composite's masked_fill gives (at
    finite rows ds is 0 there already: their weights are 0)."""
    xp = array_module(g)
    dv = xp.matmul(xp.swapaxes(w, -1, -2), g)
    ds = xp.matmul(g, xp.swapaxes(v, -1, -2))
    with np.errstate(invalid="ignore"):
        rowsum = xp.einsum("...ij,...ij->...i", ds, w)
        if _native_rows(ds, w, rowsum):  # one C++ pass of numpy's two in-place ops: the same bits
            _native.softmax_grad(ds, rowsum, w)
        else:
            ds -= rowsum[..., None]
            ds *= w
        if (mask is not None or is_causal) and (xp is not np or not xp.isfinite(rowsum).all()):  # a device
            # zeroes them always: reading the check back would wait for the GPU's stream
            if mask is not None:
                xp.copyto(ds, 0, where=~mask)
            future = _future_of(xp, q.shape[-2], k.shape[-2], is_causal, diagonal, offsets, 1)
            if future is not None:
                xp.copyto(ds, 0, where=future)
        dq = xp.matmul(ds, k)
        dq *= dq.dtype.type(scale)
        dk = xp.matmul(xp.swapaxes(ds, -1, -2), q)
        dk *= dk.dtype.type(scale)
    return dq, dk, dv
