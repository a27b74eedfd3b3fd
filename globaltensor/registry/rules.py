"""Rule generators: the SBP rows of op families, for one mesh axis, each with its algebra.

A row is (input SBPs, output SBPs). The dispatcher expands rows to N-D meshes (one row per
mesh axis) and prices them; `broadcast_only` is always valid (every rank computes it all).
The family generators (`elementwise`, `reduction`) also know their ops' output shape: their
rules carry `out_shape(in_shapes, static)`, which the registry turns into the op's meta.
Below them: helpers for writing metas (registry.py says what a meta is).
"""
import numpy as np

from ..errors import IndexRuntimeError, not_broadcast
from ..sbp import broadcast as B
from ..sbp import partial_sum as P
from ..sbp import split


def broadcast_only(in_shapes, out_shapes, static):
    """B, ..., B -> B: every rank holds everything and computes everything."""
    return [((B,) * len(in_shapes), (B,) * len(out_shapes))]


def elementwise(linear=None):
    """Rows of an element-wise op with numpy broadcasting.

    S(d) of the output: inputs that span dim d are split the same way, inputs that are
    broadcast along it (size 1 or missing) stay B:  f(x)[i] = f(x[i]).
    linear="sum":  P + P -> P       (a1 + a2) + (b1 + b2) = (a1 + b1) + (a2 + b2)
    linear="each": P op B -> P, B op P -> P (for mul), P / B -> P (for div: first only)
    linear="unary": P -> P          -(a1 + a2) = -a1 + -a2
    """
    def rules(in_shapes, out_shapes, static):
        out = out_shapes[0]
        rows = []
        for d in range(len(out)):
            row = []
            for shape in in_shapes:
                a = d - (len(out) - len(shape))
                row.append(split(a) if a >= 0 and (shape[a] == out[d] or out[d] == 0) else B)
            rows.append((tuple(row), (split(d),)))
        rows.append(((B,) * len(in_shapes), (B,)))
        if linear in ("sum", "unary"):
            rows.append(((P,) * len(in_shapes), (P,)))
        elif linear in ("each", "first"):
            for i in range(1 if linear == "first" else len(in_shapes)):
                rows.append((tuple(P if j == i else B for j in range(len(in_shapes))), (P,)))
        return rows
    rules.out_shape = broadcast_shape
    return rules


def broadcast_shape(in_shapes, static=None):
    """numpy's broadcast of the input shapes (ShapeError, PyTorch's message, when they do not)."""
    shapes = [tuple(s) for s in in_shapes]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise not_broadcast("", shapes) from None


def reduction(linear):
    """Rows of a reduction over static["dims"] (a tuple; all dims when None) with "keepdim".

    S(d), d kept      -> S(d')   reduce(x)[i] = reduce(x[i])
    S(d), d reduced   -> P       sum(x) = sum(x[:k1]) + sum(x[k1:])     (linear only)
    P                 -> P       sum(a1 + a2) = sum(a1) + sum(a2)         (linear only)
    """
    def rules(in_shapes, out_shapes, static):
        shape = in_shapes[0]
        dims = _dims(static.get("dims"), len(shape))
        keep = static.get("keepdim", False)
        rows = [((B,), (B,) * len(out_shapes))]
        for d in range(len(shape)):
            if d in dims:
                if linear:
                    rows.append(((split(d),), (P,)))
            else:
                out_d = d if keep else d - sum(1 for r in dims if r < d)
                rows.append(((split(d),), (split(out_d),) * len(out_shapes)))
        if linear:
            rows.append(((P,), (P,)))
        return rows
    rules.out_shape = reduced_shape
    return rules


def reduced_shape(in_shapes, static):
    """The first input's shape without static["dims"] (all when None), or with them 1 (keepdim)."""
    shape = tuple(in_shapes[0])
    dims = _dims(static.get("dims"), len(shape))
    if static.get("keepdim", False):
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _dims(dims, ndim):
    if dims is None:
        return set(range(ndim))
    return {d % ndim if ndim else 0 for d in dims}


def einsum(spec, bilinear=True):
    """Rows of a contraction like "mk,kn->mn" (letters: dims; batch letters in all three).

    S on a letter kept in the output, in the inputs that have it (B in the others) -> S there
        (x @ y)[i] = x[i] @ y
    S on a contracted letter in every input -> P
        x @ y = x[:, :k1] @ y[:k1] + x[:, k1:] @ y[k1:]
    P in one input, B in the others -> P  (bilinear: (a1 + a2) @ y = a1 @ y + a2 @ y)
    """
    ins, out = spec.split("->")
    ins = ins.split(",")

    def rules(in_shapes, out_shapes, static):
        rows = [((B,) * len(ins), (B,))]
        letters = dict.fromkeys("".join(ins) + out)
        for letter in letters:
            row = tuple(split(s.index(letter)) if letter in s else B for s in ins)
            if letter in out:
                rows.append((row, (split(out.index(letter)),)))
            elif all(letter in s for s in ins):
                rows.append((row, (P,)))
        if bilinear:
            for i in range(len(ins)):
                rows.append((tuple(P if j == i else B for j in range(len(ins))), (P,)))
        return rows
    return rules


def along_dims(free_dims_fn, linear=False):
    """Rows of an op acting along some dims and independent along the others.

    free_dims_fn(in_shape, out_shape, static) -> [(input dim, output dim)] pairs along which
    slices are independent: S(in) -> S(out)   op(x)[.., i, ..] = op(x[.., i, ..]).
    linear: P -> P as well.
    """
    def rules(in_shapes, out_shapes, static):
        rows = [((B,) * len(in_shapes), (B,) * len(out_shapes))]
        for d_in, d_out in free_dims_fn(in_shapes[0], out_shapes[0], static):
            rows.append(((split(d_in),) + (B,) * (len(in_shapes) - 1), (split(d_out),) * len(out_shapes)))
        if linear:
            rows.append(((P,) * len(in_shapes), (P,) * len(out_shapes)))
        return rows
    return rules


# --- metas ----------------------------------------------------------------------------------

def result_dtype(*dtypes):
    """numpy's result type of these dtypes (gt or numpy), as numpy's kernels promote."""
    return np.result_type(*[getattr(d, "np", d) for d in dtypes])


def like(i=0):
    """The meta of an op whose one output has input i's shape and dtype (a scatter into x)."""
    def meta(in_shapes, in_dtypes, static):
        return [tuple(in_shapes[i])], [in_dtypes[i]]
    return meta


def check_index_dtype(name, dtype, what="index"):
    """IndexError unless `dtype` is an integer dtype (what indexing kernels accept)."""
    kind = (dtype.np if hasattr(dtype, "np") else np.dtype(dtype)).kind
    if kind not in "iu":
        raise IndexRuntimeError(f"{name}(): Expected dtype int32 or int64 for {what} (the {what} must be an integer "
                              f"tensor, got {dtype!r})")


def check_ndim(name, shape, ndims, what="input"):
    if len(shape) not in ndims:
        raise ValueError(f"{name}: the {what} must have {' or '.join(map(str, ndims))} dims, got shape {tuple(shape)}")
