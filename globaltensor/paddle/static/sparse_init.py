"""A sparse table's row initializer (SparseSpec.init) from a Paddle initializer and the table's [vocab, dim]."""


class _Shape:
    def __init__(self, shape):
        self.shape = shape


def init_spec(initializer, shape, what):
    """SparseSpec.init of a Paddle initializer: Uniform, Normal, Constant, and Xavier / Kaiming
    (uniform or normal) with the fans of the [vocab, dim] table, as the startup op Paddle's PS
    passes read; anything else (TruncatedNormal, Assign, ...) raises."""
    from ..nn import initializer as init
    if isinstance(initializer, init.TruncatedNormal):
        found = None
    elif isinstance(initializer, init.Uniform):
        found = ("uniform", initializer._low, initializer._high)
    elif isinstance(initializer, init.Normal):
        found = ("normal", initializer._mean, initializer._std)
    elif isinstance(initializer, init.Constant):
        found = ("constant", initializer._value_)
    elif isinstance(initializer, init.XavierNormal) and shape is not None:
        found = ("normal", 0.0, initializer._scale(_Shape(shape), 2.0))
    elif isinstance(initializer, init.XavierUniform) and shape is not None:
        limit = initializer._scale(_Shape(shape), 6.0)
        found = ("uniform", -limit, limit)
    elif isinstance(initializer, init.KaimingNormal) and shape is not None:
        fan, gain = initializer._fan_and_gain(_Shape(shape))
        scale = gain / fan ** 0.5 if fan else 0.0
        found = ("uniform", -scale * 3 ** 0.5, scale * 3 ** 0.5) if isinstance(initializer, init.KaimingUniform) \
            else ("normal", 0.0, scale)
    else:
        found = None
    if found is None:
        raise ValueError(f"{what}: initializer {type(initializer).__name__}: a sparse table's rows are made on the "
                         f"servers by Uniform, Normal, Constant, XavierUniform/XavierNormal or "
                         f"KaimingUniform/KaimingNormal only")
    return (found[0],) + tuple(float(v) for v in found[1:])
