"""cuBLASLt kernels against their numpy twins (cuda marker); without cuBLASLt a clear error."""
import numpy as np
import pytest

from globaltensor import _C
from globaltensor.backends import cuda_kernels

SHAPES = [(7, 13, 5), (128, 1024, 4096), (256, 512, 384)]   # (m, k, n)
TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "float64": 1e-8}  # float64 GELU epilogue: ~1e-9 (H100)


def test_a_build_without_cublaslt_says_how_to_get_it():
    if _C.with_cublaslt:
        pytest.skip("_C has cuBLASLt")
    with pytest.raises(RuntimeError, match="built without cuBLASLt"):
        cuda_kernels.matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))


def _inputs(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) / np.sqrt(k)).astype(dtype) for s in ((m, k), (n, k), (n,), (m, n))]


def _gelu_tanh(y):
    return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))


def _need_gpu_kernels():
    cupy = pytest.importorskip("cupy")
    if not _C.with_cublaslt:
        pytest.skip("_C was built without cuBLASLt")
    return cupy


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_linear_matmul_and_weight_grad_match_numpy(m, k, n, dtype):
    cupy = _need_gpu_kernels()
    x, w, b, g = _inputs(m, k, n, dtype)
    x64, w64, b64, g64 = (a.astype(np.float64) for a in (x, w, b, g))
    tol = TOLERANCE[dtype]
    dx, dw_, db_, dg = (cupy.asarray(a) for a in (x, w, b, g))
    for activation, fn in (("identity", lambda y: y), ("relu", lambda y: np.maximum(y, 0)), ("gelu_tanh", _gelu_tanh)):
        got = cupy.asnumpy(cuda_kernels.linear(dx, dw_, db_, activation)).astype(np.float64)
        np.testing.assert_allclose(got, fn(x64 @ w64.T + b64), rtol=tol, atol=tol)
    got = cupy.asnumpy(cuda_kernels.matmul(dx, cupy.ascontiguousarray(dw_.T))).astype(np.float64)
    np.testing.assert_allclose(got, x64 @ w64.T, rtol=tol, atol=tol)
    dwt, dbt = cuda_kernels.linear_weight_grad(dg, dx)
    np.testing.assert_allclose(cupy.asnumpy(dwt).astype(np.float64), g64.T @ x64, rtol=tol, atol=tol * np.sqrt(m))
    np.testing.assert_allclose(cupy.asnumpy(dbt).astype(np.float64), g64.sum(0), rtol=tol, atol=tol * np.sqrt(m))


@pytest.mark.cuda
def test_bfloat16_travels_as_uint16():
    import ml_dtypes
    cupy = _need_gpu_kernels()
    x, w, b, _ = _inputs(64, 256, 128, ml_dtypes.bfloat16)
    as_u16 = [cupy.asarray(a.view(np.uint16)) for a in (x, w, b)]
    got = cupy.asnumpy(cuda_kernels.linear(*as_u16, activation="relu", dtype="bfloat16")).view(ml_dtypes.bfloat16)
    want = np.maximum(x.astype(np.float32) @ w.astype(np.float32).T + b.astype(np.float32), 0)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=3e-2, atol=3e-2)


@pytest.mark.cuda
def test_bad_shapes_raise_before_any_kernel():
    cupy = _need_gpu_kernels()
    with pytest.raises(ValueError, match=r"w has shape \(3, 5\); \(3, 4\) expected"):
        cuda_kernels.linear(cupy.zeros((2, 4), cupy.float32), cupy.zeros((3, 5), cupy.float32))
    with pytest.raises(TypeError, match="share one dtype"):
        cuda_kernels.matmul(cupy.zeros((2, 2), cupy.float32), cupy.zeros((2, 2), cupy.float16))
