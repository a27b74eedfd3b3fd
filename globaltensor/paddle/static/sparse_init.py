"""A sparse table's row initializer (SparseSpec.init) from a Paddle initializer and the table's [vocab, dim]."""


class _Shape:
    def __init__(self, shape):
        self.shape = shape


def init_spec(initializer, shape, what):
    """SparseSpec.init of a Paddle initializer: the one draw it declares (`Initializer._draw`: Uniform,
    Normal, Constant, and Xavier / Kaiming with the fans of the [vocab, dim] table, as the startup op
    Paddle's PS passes read; without a shape, only those that need no fans), so a row drawn on a server
    has the bounds the dense fill would use; a fill that is not one draw (TruncatedNormal, Assign, ...)
    raises."""
    from ..nn import initializer as init
    by_fans = isinstance(initializer, (init.XavierUniform, init.KaimingNormal))
    found = None if shape is None and by_fans else initializer._draw(_Shape(shape))
    if found is None or found[0] not in ("uniform", "normal", "constant"):
        raise ValueError(f"{what}: initializer {type(initializer).__name__}: a sparse table's rows are made on the "
                         f"servers by Uniform, Normal, Constant, XavierUniform/XavierNormal or "
                         f"KaimingUniform/KaimingNormal only")
    kind, a, b = found
    return (kind, float(a)) if kind == "constant" else (kind, float(a), float(b))
