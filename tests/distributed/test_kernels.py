"""Native reduction and copy kernels against their numpy twins, without processes."""
import ml_dtypes
import numpy as np
import pytest

from globaltensor import _native

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
          "int32": np.int32, "int64": np.int64}
OPS = _native.RedOp.__members__


def twin(srcs, op, dtype):
    """What the kernel must give: combine in order, half types in float32, round once."""
    wide = np.float32 if np.dtype(dtype).itemsize == 2 else dtype
    acc = srcs[0].astype(wide)
    for s in srcs[1:]:
        s = s.astype(wide)
        if op in ("sum", "avg"):
            acc = acc + s if np.dtype(wide).kind == "f" else (acc.astype(np.int64) + s).astype(wide)
        else:
            acc = (np.maximum if op == "max" else np.minimum)(acc, s)
    if op == "avg":  # the sum divided by the count once, in the wide type (numpy's `sum /= k`)
        acc /= len(srcs)
    return acc.astype(dtype)


@pytest.mark.parametrize("nsrc", [1, 2, 3, 5])
@pytest.mark.parametrize("count", [0, 1, 7, 2048, 2049, 100_003])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_matches_twin(dtype, op, count, nsrc):
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(count * 10 + nsrc)
    if np.dtype(np_dtype).kind == "i":
        srcs = [rng.integers(-(2**20), 2**20, count).astype(np_dtype) for _ in range(nsrc)]
    else:
        srcs = [(rng.standard_normal(count) * 100).astype(np_dtype) for _ in range(nsrc)]
    out = np.empty(count, np_dtype)
    if op == "avg" and np.dtype(np_dtype).kind == "i":
        with pytest.raises(ValueError, match="avg reduces float types only"):
            _native.reduce_into(out, srcs, OPS[op])
        return
    _native.reduce_into(out, srcs, OPS[op], nontemporal=count > 2048)
    np.testing.assert_array_equal(out.view(np.uint8), twin(srcs, op, np_dtype).view(np.uint8))


def test_integer_sum_wraps():
    big = np.array([2**62, -(2**63)], np.int64)
    out = np.empty_like(big)
    _native.reduce_into(out, [big, big], _native.RedOp.sum)
    np.testing.assert_array_equal(out, big + big)  # numpy wraps too


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_max_min_propagate_nan(dtype):
    np_dtype = DTYPES[dtype]
    a = np.array([1, np.nan, 3], np_dtype)
    b = np.array([np.nan, 2, 1], np_dtype)
    for op in ("max", "min"):
        out = np.empty_like(a)
        _native.reduce_into(out, [a, b], OPS[op])
        assert np.isnan(out.astype(np.float32)[:2]).all()


def test_half_rounding_special_values():
    vals = np.array([0.0, -0.0, 6.1e-5, 5.96e-8, 2.98e-8, 3.0e-8, 1e-6, 65504, 65519, 1e-10, np.inf, -np.inf,
                     0.1, 2049, 2051], np.float32)
    for np_dtype in (DTYPES["float16"], DTYPES["bfloat16"]):
        a = vals.astype(np_dtype)
        out = np.empty_like(a)
        _native.reduce_into(out, [a, np.zeros_like(a)], _native.RedOp.sum)
        np.testing.assert_array_equal(out.view(np.uint16), (a.astype(np.float32) + 0).astype(np_dtype).view(np.uint16))


@pytest.mark.parametrize("nbytes", [0, 1, 15, 255, 256, 4097, 1 << 20])
@pytest.mark.parametrize("offset", [0, 1, 8])
def test_copy_bytes_streaming(nbytes, offset):
    src = np.random.default_rng(nbytes).integers(0, 255, nbytes + 16, dtype=np.uint8)
    dst = np.zeros(nbytes + 16, np.uint8)
    _native.copy_bytes(dst[offset:offset + nbytes], src[3:3 + nbytes], nontemporal=True)
    np.testing.assert_array_equal(dst[offset:offset + nbytes], src[3:3 + nbytes])
    assert not dst[:offset].any() and not dst[offset + nbytes:].any()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_sum_over_every_bit_pattern(dtype):
    np_dtype = DTYPES[dtype]
    a = np.arange(65536, dtype=np.uint16).view(np_dtype)
    a = a[np.isfinite(a.astype(np.float32))]
    b = np.random.default_rng(7).permutation(a)
    out = np.empty_like(a)
    _native.reduce_into(out, [a, b], _native.RedOp.sum)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(np_dtype)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a, b", [(-0.01, 1.0), (1.0, 0.9), (0.3, -2.5)])
def test_axpby_has_numpys_rounding(dtype, a, b):
    rng = np.random.default_rng(1)
    y, x = rng.standard_normal(10_007).astype(dtype), rng.standard_normal(10_007).astype(dtype)
    want = y.copy()
    want *= b
    want += a * x
    _native.axpby(y, x, a, b)
    assert np.array_equal(y, want)


def test_axpby_rejects_what_it_cannot_do():
    y = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        _native.axpby(y[:4], y[2:6], 1.0, 1.0)
    with pytest.raises(ValueError, match="match"):
        _native.axpby(y, np.zeros(8, np.float64), 1.0, 1.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        _native.axpby(np.zeros(4, np.int32), np.zeros(4, np.int32), 1.0, 1.0)


def test_reduce_into_takes_the_dtype_from_the_arrays_and_refuses_what_it_cannot_reduce():
    a = np.arange(4, dtype=np.int32)
    with pytest.raises(TypeError, match=r"reduce_into: a source's dtype \(float32\) differs from out's \(int32\)"):
        _native.reduce_into(np.empty(4, np.int32), [a, np.zeros(4, np.float32)], _native.RedOp.sum)
    for bad in (np.bool_, np.int8, np.uint8, np.int16):
        x = np.zeros(4, bad)
        name = np.dtype(bad).name
        with pytest.raises(TypeError, match=f"reduce_into: cannot reduce dtype {name}; supported: float32, float64, "
                                            "float16, bfloat16, int32, int64"):
            _native.reduce_into(np.empty_like(x), [x, x], _native.RedOp.sum)
    z = np.ones(4, np.complex64)  # complex sums as float pairs; an order it does not have is refused
    _native.reduce_into(out := np.empty_like(z), [z, z * 1j], _native.RedOp.sum)
    np.testing.assert_array_equal(out, z + z * 1j)
    with pytest.raises(TypeError, match="cannot reduce dtype complex64 with max: complex numbers are not ordered"):
        _native.reduce_into(np.empty_like(z), [z, z], _native.RedOp.max)
    swapped = np.zeros(4, ">f4")  # the right kind and size, but not this machine's byte order
    with pytest.raises(TypeError, match="cannot reduce dtype >f4"):
        _native.reduce_into(np.empty_like(swapped), [swapped], _native.RedOp.sum)
    with pytest.raises(TypeError):  # a raw number is not a reduction op
        _native.reduce_into(np.empty(4, np.int32), [a], 0)


@pytest.mark.parametrize("alias", [None, 0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_reduce_into_one_destination_summed_in_place_or_aliasing_a_source(dtype, alias):
    """One destination of the accumulator's type is summed in directly (several 8 KiB blocks, a partial
    last one), unless it shares memory with a source (all_reduce in place): the twin's bits either way."""
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(7 + (alias or 0))
    count = 3 * 2048 + 333
    for op in ("sum", "max", "avg"):
        if op == "avg" and np.dtype(np_dtype).kind == "i":
            continue
        srcs = [(rng.standard_normal(count) * 100).astype(np_dtype) for _ in range(3)]
        want = twin(srcs, op, np_dtype)
        out = np.empty(count, np_dtype) if alias is None else srcs[alias]
        _native.reduce_into(out, srcs, OPS[op], nontemporal=False)
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
