"""cuBLASLt kernels against their numpy twins (cuda marker); without cuBLASLt a clear error."""
import numpy as np
import pytest

from globaltensor import _native
from globaltensor.backends import cuda_kernels

SHAPES = [(7, 13, 5), (128, 1024, 4096), (256, 512, 384)]   # (m, k, n)
TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "float64": 1e-8}  # float64 GELU epilogue: ~1e-9 (H100)


def test_a_build_without_cublaslt_says_how_to_get_it():
    if _native.with_cublaslt:
        pytest.skip("_native has cuBLASLt")
    with pytest.raises(RuntimeError, match="built without cuBLASLt"):
        cuda_kernels.matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))


def _inputs(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) / np.sqrt(k)).astype(dtype) for s in ((m, k), (n, k), (n,), (m, n))]


def _gelu_tanh(y):
    return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))


def _need_gpu_kernels():
    cupy = pytest.importorskip("cupy")
    if not _native.with_cublaslt:
        pytest.skip("_native was built without cuBLASLt")
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


def _placed_linear_and_matmul(dtype):
    """linear (forward and backward) and matmul on placement("cuda", [0, 1]) in float32 or
    bfloat16, for data-, column- and row-parallel layouts; the float64 reference, and which
    device paths ran."""
    import globaltensor as gt
    from globaltensor.debug import device_paths
    S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
    pl = gt.placement("cuda", [0, 1])
    rng = np.random.default_rng(7)
    x, w, b, g = (rng.standard_normal(s).astype(np.float32) for s in ((9, 48), (20, 48), (20,), (9, 20)))
    before, errors = device_paths(), {}
    for sx, sw, sb in ((S0, B, B), (B, S0, S0), (S1, S1, B)):   # data, column, row parallel
        xt, wt, bt = (gt.tensor(a, dtype=dtype, placement=pl, sbp=s, requires_grad=True)
                      for a, s in ((x, sx), (w, sw), (b, sb)))
        y = gt.nn.functional.linear(xt, wt, bt)
        (y * gt.tensor(g, dtype=dtype, placement=pl, sbp=B)).sum().backward()
        for name, got, want in (("y", y, x @ w.T + b), ("dx", xt.grad, g @ w), ("dw", wt.grad, g.T @ x),
                                ("db", bt.grad, g.sum(0)), ("matmul", gt.matmul(xt, wt.T), x @ w.T)):
            want = want.astype(np.float64)
            error = np.abs(got.numpy().astype(np.float64) - want).max() / np.abs(want).max()
            errors[f"{sx},{sw} {name}"] = float(error)
    after = device_paths()
    return errors, {k: after.get(k, 0) - before.get(k, 0) for k in after}


@pytest.mark.cuda
@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_placed_linear_runs_cublaslt_in_float32_and_bfloat16(dtype, tol):
    """The every-op suite runs in float64, which cuBLASLt never sees: here float32 and bfloat16
    on a cuda placement, against float64, with the kernels and the transport that ran."""
    from conftest import run_ranks
    for errors, paths in run_ranks(_placed_linear_and_matmul, 2, dtype, timeout=240):
        assert max(errors.values()) < tol, errors
        for path in ("cublaslt.linear", "cublaslt.linear_weight_grad", "cublaslt.matmul", "ipc.all_reduce"):
            assert paths.get(path, 0) > 0, (path, paths)
        assert "host.all_reduce" not in paths, paths  # sums never go through the host (IPC: one GPU shared)


@pytest.mark.cuda
@pytest.mark.parametrize("offset", [1, 2, 10])   # elements: 4, 8 and 40 bytes past an aligned start
def test_pieces_at_any_offset(offset):
    """Pieces are often views (B -> S is a free slice): cuBLASLt plans for the alignment each
    pointer has, not the 256 bytes of a fresh allocation."""
    cupy = _need_gpu_kernels()
    x, w, b, g = _inputs(33, 64, 24, "float32", seed=offset)

    def at_offset(a):
        flat = cupy.empty(a.size + offset, a.dtype)
        view = flat[offset:].reshape(a.shape)
        view[...] = cupy.asarray(a)
        return view

    dx, dw_, db_, dg = (at_offset(a) for a in (x, w, b, g))
    np.testing.assert_allclose(cupy.asnumpy(cuda_kernels.linear(dx, dw_, db_, "relu")), np.maximum(x @ w.T + b, 0),
                               rtol=1e-4, atol=1e-4)
    dwt, dbt = cuda_kernels.linear_weight_grad(dg, dx)
    np.testing.assert_allclose(cupy.asnumpy(dwt), g.T @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cupy.asnumpy(dbt), g.sum(0), rtol=1e-4, atol=1e-4)
