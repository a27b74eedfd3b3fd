"""numpy kernels that follow PyTorch where numpy answers otherwise: sign at NaN, integer powers with negative exponents."""
import numpy as np


def sign_kernel(x):
    """numpy's sign, 0 at NaN as PyTorch's; a bool tensor is its own sign."""
    if x.dtype == np.bool_:
        return x.copy()
    out = np.sign(x)
    if out.dtype.kind == "f":
        out[np.isnan(x)] = 0
    return out


def power_kernel(a, b):
    """a ** b; for integers as PyTorch: a negative exponent gives 1 for a base of 1, +-1 for -1 and
    0 otherwise (0 ** -1 too), where numpy raises."""
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        return np.power(a, b)
    y = np.power(a, np.maximum(b, 0))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(y.dtype)
    return np.where(b < 0, negative, y)
