"""Local kernels on cupy arrays through _native.cuda (cuBLASLt): matmul, the fused linear layer
(matmul + bias + ReLU or tanh-GELU in one call) and its weight gradient with the bias gradient
fused. Arrays are 2-D (copied to C order when they are not), of one dtype (bfloat16 is ml_dtypes'
bfloat16, which cupy 14 knows, or uint16 with dtype="bfloat16")."""
import os

import numpy as np

from .. import _native
from .. import dtype as _dtype
from .cuda import find_library
from .devices import simulated, took

ACTIVATIONS = {"identity": 0, "relu": 1, "gelu_tanh": 2}
_FLOATS = ("float32", "float64", "float16", "bfloat16")
_loaded = []


def usable(*arrays, op="matmul"):
    """Whether these pieces take the cuBLASLt path: 2-D cupy arrays of one dtype among float32,
    float16 and bfloat16 (float64 stays with cupy), _native built with cuBLASLt, not turned off by
    GLOBALTENSOR_CUBLASLT=0, and a real GPU (not simulated_cupy). Device pieces that do not are
    counted as "cupy.<op>" in gt.debug.device_paths()."""
    if isinstance(arrays[0], np.ndarray):
        return False
    if _fits(arrays):
        return True
    took(f"cupy.{op}")
    return False


def _fits(arrays):
    a = arrays[0]
    if a.ndim != 2 or a.dtype.name not in ("float32", "float16", "bfloat16"):
        return False
    if any(x is not None and (x.dtype != a.dtype or isinstance(x, np.ndarray)) for x in arrays[1:]):
        return False
    if os.environ.get("GLOBALTENSOR_CUBLASLT", "1") == "0" or simulated():
        return False
    return getattr(_native, "with_cublaslt", False)


def cublaslt_path():
    """$GLOBALTENSOR_CUBLASLT_LIBRARY, else libcublasLt of an nvidia-cublas wheel on sys.path, else
    "" (the loader's search path)."""
    return find_library("GLOBALTENSOR_CUBLASLT_LIBRARY", [("nvidia", "cu13", "lib"), ("nvidia", "cublas", "lib")],
                        "libcublasLt.so*", "")


def _ready():
    """cupy, once _native has cuBLASLt and libcublasLt is open; RuntimeError saying what is missing."""
    if not getattr(_native, "with_cublaslt", False):
        raise RuntimeError("globaltensor._native was built without cuBLASLt: reinstall where cublasLt.h is found "
                           "(the CUDA toolkit, or GLOBALTENSOR_CUBLAS_INCLUDE) with GLOBALTENSOR_BUILD_CUDA=1")
    if not _loaded:
        path = cublaslt_path()
        if not _native.cuda.load_cublaslt(path):
            raise RuntimeError(f"libcublasLt could not be opened ({path or 'loader search path'}); "
                               "pip install nvidia-cublas, or set GLOBALTENSOR_CUBLASLT_LIBRARY")
        _loaded.append(path)
    import cupy
    return cupy


def _code(arrays, dtype):
    names = {a.dtype.name for a in arrays if a is not None}
    if len(names) != 1:
        raise TypeError(f"the arrays must share one dtype, got {sorted(names)}")
    name = dtype if dtype is not None else names.pop()
    if name not in _FLOATS:
        raise TypeError(f"cuBLASLt kernels take {sorted(_FLOATS)}, got {name}")
    return _dtype.to_dtype(name).code


def _matrix(a, name, shape=None):
    """a as a C-ordered 2-D array (copied when it is not in C order), its shape checked."""
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {a.shape}")
    if shape is not None and tuple(a.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(a.shape)}; {shape} expected")
    return a if a.flags.c_contiguous else a.copy()


def _stream():
    import cupy
    return cupy.cuda.get_current_stream().ptr


def matmul(a, b, tf32=False, dtype=None):
    """a (m x k) @ b (k x n)."""
    cupy, code = _ready(), _code([a, b], dtype)
    a = _matrix(a, "a")
    (m, k), n = a.shape, b.shape[-1]
    b = _matrix(b, "b", (k, n))
    c = cupy.empty((m, n), a.dtype)
    took("cublaslt.matmul")
    _native.cuda.matmul(c.data.ptr, a.data.ptr, b.data.ptr, m, n, k, code, tf32, _stream())
    return c


def linear(x, w, bias=None, activation="identity", tf32=False, dtype=None):
    """act(x (m x k) @ w.T + bias), w (n x k); one cuBLASLt call. activation: identity, relu or
    gelu_tanh (cuBLASLt's GELU is the tanh approximation)."""
    cupy, code = _ready(), _code([x, w, bias], dtype)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    x = _matrix(x, "x")
    (m, k), n = x.shape, w.shape[0]
    w = _matrix(w, "w", (n, k))
    if bias is not None:
        if bias.shape != (n,):
            raise ValueError(f"bias must be a vector of {n}, got shape {bias.shape}")
        bias = cupy.ascontiguousarray(bias)
    y = cupy.empty((m, n), x.dtype)
    took("cublaslt.linear")
    _native.cuda.linear_forward(y.data.ptr, x.data.ptr, w.data.ptr, 0 if bias is None else bias.data.ptr, m, n, k, code,
                           ACTIVATIONS[activation], tf32, _stream())
    return y


def linear_weight_grad(g, x, bias_grad=True, tf32=False, dtype=None):
    """(g.T @ x, g summed over rows or None) for g (m x n), x (m x k): one cuBLASLt call."""
    cupy, code = _ready(), _code([g, x], dtype)
    g = _matrix(g, "g")
    (m, n), k = g.shape, x.shape[-1]
    x = _matrix(x, "x", (m, k))
    dw = cupy.empty((n, k), g.dtype)
    db = cupy.empty((n,), g.dtype) if bias_grad else None
    took("cublaslt.linear_weight_grad")
    try:
        _native.cuda.linear_weight_grad(dw.data.ptr, 0 if db is None else db.data.ptr, g.data.ptr, x.data.ptr, m, n, k,
                                   code, tf32, _stream())
    except RuntimeError as exc:  # no fused bias-gradient algorithm for this case: reduce separately
        if db is None or "no algorithm" not in str(exc) or code == _native.DType.bfloat16:
            raise
        _native.cuda.linear_weight_grad(dw.data.ptr, 0, g.data.ptr, x.data.ptr, m, n, k, code, tf32, _stream())
        db = g.sum(axis=0)
    return dw, db
