"""embedding: rows of a table at integer indices; a table split by rows gives a partial sum (vocabulary parallel)."""
import numpy as np

from .. import scope
from ..registry import rules
from ._front import apply, tensors
from .elementwise import where
from .gather_scatter import _in_slice, zeros_under
from ..registry import op
from .row_grad import RowGrad

B, P, S = rules.B, rules.P, rules.split


def _embedding_rows(s, o, st):
    """indices, weight (num, dim) -> rows of weight at the indices.
    indices S(d), weight B -> S(d)           each position looks up its own row
    weight S(1) (columns) -> S(last)         each rank holds a slice of every row
    weight P -> P                            the lookup is linear in the table
    weight S(0) (rows), indices B -> P       each rank looks up the ids in its rows, zeros for
                                             the rest (the vocabulary-parallel embedding)"""
    n = len(s[0])
    return ([((B, B), (B,)), ((B, P), (P,)), ((B, S(1)), (S(n),)), ((B, S(0)), (P,))] +
            [((S(d), B), (S(d),)) for d in range(n)])


def _embedding_backward(ctx, g):
    """The table's gradient: the output's rows added at the indices. sparse=True on a local table:
    only those rows (a RowGrad), else the dense [num, dim] gradient."""
    indices, weight = ctx.inputs
    flat_idx = indices.reshape(-1)
    flat_g = g.reshape(-1, weight.shape[1])
    if ctx.static.get("sparse") and weight._placement is None and _rows_recordable():
        return None, RowGrad([(flat_idx, flat_g)], weight.shape, weight.dtype)
    return None, apply("index_add", [zeros_under(weight, g), flat_idx, flat_g], {"dim": 0, "size": weight.shape[0]})


def _rows_recordable():
    """Eagerly, or recorded by a recorder that keeps row gradients (static mode's); a graph's capture
    records the dense gradient (the same values)."""
    rec = scope.recorder()
    return rec is None or getattr(rec, "takes_row_grads", False)


def _embedding_meta(s, dt, st):
    indices, weight = tuple(s[0]), tuple(s[1])
    rules.check_index_dtype("embedding", dt[0], "indices")
    if len(weight) != 2:
        raise ValueError(f"embedding: the weight must be 2-D (num_embeddings, dim), got shape {weight}")
    return [indices + weight[1:]], [dt[1]]


@op("embedding", _embedding_rows, _embedding_backward, meta=_embedding_meta, takes_offsets=True)
def _embedding(indices, weight, num=None, sparse=False, offsets=None):
    """The table's rows at the indices; a piece of the table (rows from offsets[1][0]) gives zeros
    for the indices outside it. Indices outside the whole table (num rows) raise IndexError."""
    num = weight.shape[0] if num is None else num
    local, inside = _in_slice("embedding", indices, num, offsets[1][0] if offsets else 0, weight.shape[0])
    if inside is None:
        return np.take(weight, local, axis=0)
    if weight.shape[0] == 0:
        return np.zeros(indices.shape + weight.shape[1:], weight.dtype)
    return np.where(inside[..., None], np.take(weight, local, axis=0), 0).astype(weight.dtype, copy=False)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of weight at the indices x (PyTorch's F.embedding). Rows: indices split -> output split
    alike; weight split by columns (S(1)) -> output split on its last dim; partial weight -> partial
    output. A table split by rows (S(0)) gives a partial output: each rank looks up the indices that
    fall in its rows and leaves zeros elsewhere (the model-parallel embedding). Indices outside
    the table raise IndexError. sparse=True: the gradient of a local table is a RowGrad (only the
    looked-up rows), which the optimizers apply to those rows only."""
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding: max_norm and scale_grad_by_freq are not supported")
    input, weight = tensors(input, weight)
    out = apply("embedding", [input, weight], {"num": weight.shape[0], **({"sparse": True} if sparse else {})})
    if padding_idx is not None:  # PyTorch: the row is looked up as it is; only its gradient is held back
        padding_idx = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        out = where((input == padding_idx).unsqueeze(-1), out.detach(), out)
    return out
