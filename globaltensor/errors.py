"""The exception classes and message heads OneFlow's own exception tests check, shared by every check.

OneFlow raises RuntimeError for most bad input (its C++ errors surface as RuntimeError), IndexError
for a dim out of range and TypeError for a dtype that does not fit; the project's contract (SPEC §7)
says ValueError for bad arguments. Where the two differ a class here subclasses both, so code
written against either catches it. Messages start with OneFlow's (PyTorch's) words and keep ours
after them: every value involved.
"""


class ShapeError(RuntimeError, ValueError):
    """Shapes or sizes that do not fit (OneFlow: RuntimeError; SPEC: a bad argument)."""


class PlacementError(RuntimeError, ValueError):
    """Placements or SBPs that disagree between tensors or between ranks."""


class ArgumentError(RuntimeError, ValueError):
    """An argument outside its choices (OneFlow: RuntimeError; PyTorch and SPEC: ValueError)."""


class DimError(IndexError, ValueError):
    """A dim outside a tensor's dims (OneFlow and PyTorch: IndexError)."""


class IndexRuntimeError(RuntimeError, IndexError):
    """Bad indexing OneFlow raises as RuntimeError where numpy (and we, before) raise IndexError: an index
    tensor of a non-integer dtype, an index into a 0-dim tensor."""


class IndexTypeError(TypeError, RuntimeError):
    """An index of a type that cannot index (a float slice bound): PyTorch's TypeError, OneFlow's RuntimeError."""


class DTypeError(TypeError, RuntimeError):
    """Dtypes that do not fit together (OneFlow: TypeError or RuntimeError, by op)."""


def dim_out_of_range(dim, ndim, what=""):
    """PyTorch's and OneFlow's message for a dim outside [-ndim, ndim - 1] (a 0-d tensor counts as 1-D)."""
    n = max(ndim, 1)
    head = f"{what}: " if what else ""
    return DimError(f"{head}Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")


def wrap_dim(dim, ndim, what=""):
    """dim as a non-negative dim of an ndim-D tensor, or DimError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise dim_out_of_range(dim, ndim, what)
    return dim % n


def same_placement_error(a, b, what=""):
    """Two tensors of one op on different placements (or global with local), both named."""
    head = f"{what}: " if what else ""
    return PlacementError(f"{head}Expected all tensors to be on the same placement, but found at least two "
                          f"placements, {a} and {b}")


def not_broadcast(what, shapes):
    """ShapeError with PyTorch's message for the first pair of shapes that do not broadcast, at the
    first dim from the end where they differ (the op's name and every shape kept)."""
    shapes = [tuple(s) for s in shapes]
    head = f"{what}: " if what else ""
    for i, a in enumerate(shapes):
        for b in shapes[i + 1:]:
            for d in range(-1, -min(len(a), len(b)) - 1, -1):
                if a[d] != b[d] and 1 not in (a[d], b[d]):
                    return ShapeError(f"{head}The size of tensor a ({a[d]}) must match the size of tensor b ({b[d]}) "
                                      f"at non-singleton dimension {max(len(a), len(b)) + d}: shapes "
                                      f"{', '.join(map(str, shapes))} do not broadcast")
    return ShapeError(f"{head}shapes {', '.join(map(str, shapes))} do not broadcast")


def bad_reduction(what, reduction):
    """ArgumentError with OneFlow's words for a loss's reduction outside "none", "mean", "sum"."""
    return ArgumentError(f"Reduction should be none, sum or mean. ({what}: reduction must be 'none', 'mean' or "
                         f"'sum', got {reduction!r})")
