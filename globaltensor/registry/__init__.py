"""The op registry: one OpDef per op, registered with @op (the only way in).

How the dispatcher learns an op's output shapes (for its decision on global tensors) is
declared by the op, never guessed from values:

* ``meta=fn``: ``fn(in_shapes, in_dtypes, static) -> (out_shapes, out_dtypes)`` from shapes and
  dtypes alone. Every op that reads values to find positions (index, gather, scatter, embedding,
  getitem with index tensors, multiplex, ...) has one: its kernel never runs on made-up values.
* ``meta=STANDIN``: the op says its kernel, run once on zero-stride stand-ins of ones with the
  global shapes, gives the right shapes and dtypes (its output shape does not depend on values
  and it indexes nothing by value).
* ``data_dependent=True``: the output size depends on the data (nonzero, masked_select, unique).
  The inputs are boxed to broadcast, every rank runs the kernel on the whole value, and the
  output shapes are read from the results on every call (exchanged, so ranks outside the
  placement learn them and a rank that disagrees is named); the decision cache keeps the input
  plans, never a shape.
* nothing, with rules from a shape-aware generator (``rules.elementwise``, ``rules.reduction``):
  the generator gives the shapes (broadcast; reduced dims), and the kernel run on 1-element
  arrays gives the dtypes and the number of outputs.
* nothing else (an op with its own rules and no meta, as in tutorial 06): stand-ins, but only
  while every input is floating. Integer and bool tensors are what kernels index and mask by, so
  the dispatcher refuses them with a TypeError that asks for a meta. Every op of this package
  declares one or has a shape-aware generator.

Whatever the source, the dispatcher checks every piece a kernel returns against the shape its
layout says: a wrong meta fails on its first call, naming the op, not later in another op.
"""

import numpy as np

STANDIN = "standin"
"""meta=STANDIN: the kernel on zero-stride stand-ins of ones gives the output shapes and dtypes."""

# The ops that refuse complex inputs (OpDef.real_only; the dispatcher raises a TypeError naming the
# op and the dtype before its kernel, or any collective): complex numbers are not ordered, the
# function has no complex form in PyTorch, or its backward here is written for real values only.
REAL_ONLY = frozenset({
    "ceil", "floor", "round", "sign", "relu", "erf", "trunc", "floor_divide", "mod", "fmod", "maximum", "minimum",
    "greater_equal", "greater_than", "less_equal", "less_than", "clip", "max", "min", "argmax", "argmin", "sort",
    "topk", "median", "histogram", "unique", "logaddexp", "gelu", "gelu_backward", "softmax", "layer_norm",
    "layer_norm_backward", "channel_sums", "channel_affine", "channel_affine_backward", "batch_norm_stats",
    "batch_norm_apply", "batch_norm_backward", "batch_norm_backward_input", "batch_norm_running", "max_pool2d",
    "max_pool2d_backward", "mse_mean", "attention", "attention_backward", "conv2d", "conv2d_backward", "linear",
    "linear_weight_grad", "kron", "cross", "prod", "inverse", "cholesky", "det", "linear_in_out",
    "linear_in_out_grads",
    "sgd_update", "momentum_update", "adam_update", "adamw_update", "sgd_rows_update", "adam_rows_update",  # real lr
    "atan2", "digamma", "lgamma", "trigamma", "mode", "searchsorted",  # ops/extras.py
})


class OpDef:
    """An op: its numpy kernel, its SBP rows for one mesh axis, its backward, its shapes.

    kernel(*arrays, **static) -> array or tuple of arrays, on local pieces.
    rules(in_shapes, out_shapes, static) -> [(input SBPs, output SBPs)], one mesh axis.
    backward(ctx, *grads_of_outputs) -> one gradient (or None) per tensor input; ctx has
    .inputs, .outputs and .static. meta: a function (in_shapes, in_dtypes, static) ->
    (out_shapes, out_dtypes), STANDIN, or None (undeclared; see the module docstring).
    data_dependent: the output shapes depend on the values (never cached). takes_hints: the
    kernel accepts this rank's hints, out= (a destination it writes its one output into when
    shape and dtype fit) and order= ("F": the caller wants a column-major piece). Hints may
    differ between ranks: they change how a piece is laid out in memory, never the signature
    or a collective. takes_offsets: the kernel accepts offsets= (per input, the global index
    where its piece starts on every dim; None on a local tensor: all zeros), for rows whose
    kernel must know where its piece lies (gather along a split dim gives a partial sum: each
    rank takes the indices that fall in its slice).
    """

    __slots__ = ("name", "kernel", "rules", "backward", "meta", "data_dependent", "takes_hints", "takes_offsets",
                 "real_only")

    def __init__(self, name, kernel, rules, backward, meta, data_dependent, takes_hints=False, takes_offsets=False):
        self.name, self.kernel, self.rules, self.backward = name, kernel, rules, backward
        self.meta, self.data_dependent, self.takes_hints = meta, data_dependent, takes_hints
        self.takes_offsets = takes_offsets
        self.real_only = name in REAL_ONLY

    def refuse_complex(self, tensors):
        """TypeError naming the op and the dtype when a tensor input of a REAL_ONLY op is complex."""
        for i, t in enumerate(tensors):
            if t._dtype.is_complex:
                raise TypeError(f"{self.name}: not supported for complex tensors (input {i} is {t._dtype.name}): "
                                f"complex numbers are not ordered, or this op has no complex form here; take "
                                f"abs(), .real or .imag first")

    def __repr__(self):
        return f"OpDef({self.name})"


REGISTRY = {}


def op(name, rules, backward=None, meta=None, data_dependent=False, takes_hints=False, takes_offsets=False):
    """Register the decorated kernel as op `name`; returns the kernel unchanged. `meta` and
    `data_dependent` declare how its output shapes are found (see the module docstring)."""
    if data_dependent and meta is not None:
        raise ValueError(f"op {name!r}: a data-dependent op has no meta (its shapes come from its results)")
    if meta is not None and meta is not STANDIN and not callable(meta):
        raise TypeError(f"op {name!r}: meta must be a function (in_shapes, in_dtypes, static) -> "
                        f"(out_shapes, out_dtypes) or registry.STANDIN, got {meta!r}")

    def register(kernel):
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is registered twice")
        found = meta
        if found is None and not data_dependent:
            if getattr(rules, "out_shape", None) is not None:
                found = family_meta(rules.out_shape, kernel)
        REGISTRY[name] = OpDef(name, kernel, rules, backward, found, data_dependent, takes_hints, takes_offsets)
        return kernel
    return register


def family_meta(out_shape, kernel):
    """The meta of an op whose rules generator knows its output shape (`out_shape(in_shapes,
    static)`, the same for every output): the dtypes and the number of outputs come from the
    kernel run on 1-element arrays, so no value can matter and no global-size array is made."""
    def meta(in_shapes, in_dtypes, static):
        shape = tuple(out_shape(in_shapes, static))
        tiny = [np.ones((1,) * len(s), d.np) for s, d in zip(in_shapes, in_dtypes)]
        with np.errstate(all="ignore"):
            out = kernel(*tiny, **static)
        outs = out if isinstance(out, tuple) else (out,)
        return [shape] * len(outs), [np.asarray(o).dtype for o in outs]
    return meta
