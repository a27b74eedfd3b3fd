"""Tensor element types: gt.float32 and friends, each backed by a numpy dtype."""
import ml_dtypes
import numpy as np


# The dtype codes of the native kernels (kernels/types.h), by numpy dtype name.
KERNEL_CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "int32": 4, "int64": 5}


class DType:
    """An element type; `np` is its numpy dtype. Compares equal to that numpy dtype too."""

    __slots__ = ("name", "np", "is_floating")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating = self.np.kind == "f" or name == "bfloat16"

    @property
    def itemsize(self):
        return self.np.itemsize

    def __repr__(self):
        return f"gt.{self.name}"

    def __eq__(self, other):
        if isinstance(other, DType):
            return other.np == self.np
        try:
            return np.dtype(other) == self.np
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.np)


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool = DType("bool", np.bool_)  # noqa: A001 - the public name is gt.bool
int8 = DType("int8", np.int8)
uint8 = DType("uint8", np.uint8)

ALL = (float32, float64, float16, bfloat16, int32, int64, bool, int8, uint8)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(float="float32", double="float64", half="float16", long="int64", int="int32")


_default = [float32]  # what factories without dtype= make from float (or no) data


def get_default_dtype():
    """The floating dtype of factories without dtype= (gt.float32 unless set_default_dtype)."""
    return _default[0]


def set_default_dtype(dtype):
    """Make `dtype` (a floating dtype) the default of factories and of Python floats."""
    dt = to_dtype(dtype)
    if not dt.is_floating:
        raise TypeError(f"the default dtype must be a floating dtype, got {dt!r}")
    _default[0] = dt


def to_dtype(value, default=None):
    """A DType from a DType, numpy dtype/type, or name; TypeError for anything else."""
    if value is None:
        return default
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        found = _BY_NAME[value]
        return _BY_NAME[found] if isinstance(found, str) else found
    try:
        found = _BY_NP.get(np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"unsupported dtype {value!r}; supported: {', '.join(d.name for d in ALL)}")
    return found


def of_array(array):
    """The DType of a numpy array (float64 data stays float64)."""
    return to_dtype(array.dtype)
