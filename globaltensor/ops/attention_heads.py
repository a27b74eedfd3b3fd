"""Attention heads: [batch, seq, heads * head_dim] <-> [batch, heads, seq, head_dim] (split_heads, merge_heads).

A split of the features is a split of whole heads (S(2) <-> S(1)) when the heads divide evenly
over the mesh axis; otherwise a piece is not a whole number of heads and the kernel says so
(make num_heads a multiple of the axis size)."""
from ..backends.devices import array_module
from ..registry import rules
from ._front import apply, tensors
from ..registry import op

B, P, S = rules.B, rules.P, rules.split


_HEAD_ROWS = [((B,), (B,)), ((S(0),), (S(0),)), ((S(1),), (S(2),)), ((S(2),), (S(1),)), ((P,), (P,))]


def _pieces_of_heads(name, features, head_dim):
    if features % head_dim:
        raise ValueError(f"{name}: this rank's piece has {features} features, not a whole number of heads of "
                         f"{head_dim}: split the heads over a mesh axis whose size divides num_heads")
    return features // head_dim


@op("split_heads", lambda s, o, st: _HEAD_ROWS, lambda ctx, g: merge_heads(g),
    meta=lambda s, dt, st: ([(s[0][0], s[0][2] // st["head_dim"], s[0][1], st["head_dim"])], [dt[0]]))
def _split_heads(x, head_dim=1):
    b, n, e = x.shape
    h = _pieces_of_heads("split_heads", e, head_dim)
    return array_module(x).ascontiguousarray(x.reshape(b, n, h, head_dim).transpose(0, 2, 1, 3))


def split_heads(input, num_heads):
    """[batch, seq, num_heads * head_dim] -> [batch, num_heads, seq, head_dim]; features split
    over a mesh axis become heads split over it (no communication)."""
    (input,) = tensors(input)
    if input.ndim != 3 or input.shape[2] % num_heads:
        raise ValueError(f"split_heads: a [batch, seq, features] tensor with features divisible by num_heads "
                         f"({num_heads}) is needed, got shape {tuple(input.shape)}")
    return apply("split_heads", [input], {"head_dim": input.shape[2] // num_heads})


_MERGE_ROWS = [(i, o) for o, i in _HEAD_ROWS]


@op("merge_heads", lambda s, o, st: _MERGE_ROWS, lambda ctx, g: split_heads(g, ctx.inputs[0].shape[1]),
    meta=lambda s, dt, st: ([(s[0][0], s[0][2], s[0][1] * s[0][3])], [dt[0]]))
def _merge_heads(x):
    b, h, n, d = x.shape
    return array_module(x).ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, n, h * d)


def merge_heads(input):
    """[batch, heads, seq, head_dim] -> [batch, seq, heads * head_dim] (split_heads' inverse)."""
    (input,) = tensors(input)
    if input.ndim != 4:
        raise ValueError(f"merge_heads: a [batch, heads, seq, head_dim] tensor is needed, got shape "
                         f"{tuple(input.shape)}")
    return apply("merge_heads", [input])
