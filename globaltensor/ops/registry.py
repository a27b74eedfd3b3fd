"""The op registry: one OpDef per op, registered with @op (the only way in)."""


class OpDef:
    """An op: its numpy kernel, its SBP rows for one mesh axis, its backward.

    kernel(*arrays, **static) -> array or tuple of arrays, on local pieces.
    rules(in_shapes, out_shapes, static) -> [(input SBPs, output SBPs)], one mesh axis.
    backward(ctx, *grads_of_outputs) -> one gradient (or None) per tensor input; ctx has
    .inputs, .outputs and .static. meta(in_shapes, in_dtypes, static) -> (out_shapes,
    out_dtypes); None: found by running the kernel on zero-stride inputs. takes_hints: the kernel
    accepts this rank's hints, out= (a destination it writes its one output into when shape and
    dtype fit) and order= ("F": the caller wants a column-major piece). Hints may differ between
    ranks: they change how a piece is laid out in memory, never the signature or a collective.
    """

    __slots__ = ("name", "kernel", "rules", "backward", "meta", "data_dependent", "takes_hints")

    def __init__(self, name, kernel, rules, backward, meta, data_dependent, takes_hints=False):
        self.name, self.kernel, self.rules, self.backward = name, kernel, rules, backward
        self.meta, self.data_dependent, self.takes_hints = meta, data_dependent, takes_hints

    def __repr__(self):
        return f"OpDef({self.name})"


REGISTRY = {}


def op(name, rules, backward=None, meta=None, data_dependent=False, takes_hints=False):
    """Register the decorated kernel as op `name`; returns the kernel unchanged."""
    def register(kernel):
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is registered twice")
        REGISTRY[name] = OpDef(name, kernel, rules, backward, meta, data_dependent, takes_hints)
        return kernel
    return register
