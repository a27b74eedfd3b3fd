"""Small MPI calls from C++ (bindings/mpi.cpp, distributed/mpi_direct.py; issue 32, s9): the C++ fast paths of
InterHostGroup against a stand-in MPI function (ctypes, both handle ABIs), and mpi4py's own library on COMM_SELF."""
import ctypes
import functools
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from globaltensor import _native

pytestmark = pytest.mark.timeout(120)


class _Group:  # what the fast paths read and write on an InterHostGroup
    def __init__(self, k):
        self.ranks, self._in_flight, self.armed, self.seen = tuple(range(k)), [], None, []


def _stand_in_allgather(group, k, handle_bytes):
    """An MPI_Allgather of bytes as ctypes calls it: every member's share is this rank's (k copies); it
    records group.armed during the call and the handles it was given."""
    h = ctypes.c_int32 if handle_bytes == 4 else ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, h, ctypes.c_void_p, ctypes.c_int, h, h)

    def allgather(send, n, byte, recv, m, byte2, comm):
        group.seen.append((list(group.armed), byte, byte2, comm, n, m))
        for i in range(k):
            ctypes.memmove(recv + i * m, send, n)
        return 0
    fn = proto(allgather)
    return fn, ctypes.cast(fn, ctypes.c_void_p).value


@pytest.mark.parametrize("handle_bytes", [4, 8])
def test_gather_rows_in_cpp_keeps_outputs_nobody_holds_and_falls_back_otherwise(handle_bytes):
    k, group = 4, _Group(4)
    keep, fn = _stand_in_allgather(group, k, handle_bytes)
    call = _native.MpiAllgather(fn, handle_bytes, 7, 9, k)
    fallen = []

    def fallback(x, rows):
        fallen.append(rows)
        return "python"
    gr = _native.MpiGatherRows(call, group, group.ranks, 1 << 12, lambda shape, dtype: np.empty(shape, dtype),
                               fallback, functools.partial(pytest.fail, "no MPI error expected"))
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    first = gr(x, [3] * k)
    np.testing.assert_array_equal(first, np.concatenate([x] * k))
    assert group.armed is None and group.seen[0] == (["all_gather", group.ranks], 7, 7, 9, 24, 24)
    second = gr(x + 1, (3, 3, 3, 3))  # first is held by its name: a new output
    assert second.ctypes.data != first.ctypes.data
    view, address = second[1:], second.ctypes.data
    del second
    third = gr(np.repeat(x + 2, 2, axis=1)[:, ::2], np.array([3] * k))  # strided input, sizes as an array
    assert third.ctypes.data != address  # a view holds second
    address = third.ctypes.data
    del third
    fourth = gr(x + 3, [3] * k)
    assert fourth.ctypes.data == address and gr.kept == 1  # nothing held third: written again
    np.testing.assert_array_equal(first, np.concatenate([x] * k))
    np.testing.assert_array_equal(view, np.concatenate([x + 1] * k)[1:])
    np.testing.assert_array_equal(fourth, np.concatenate([x + 3] * k))
    calls = len(group.seen)
    for rows in ([3, 3, 3], [3, 3, 3, 4], [2] * k, ["3"] * k, [3.0] * k, None, [-3] * k, [1 << 70] * k):
        assert gr(x, rows) == "python"  # the method's checks and errors
    assert gr(np.zeros((200, 2), np.float32), [200] * k) == "python"  # 6400 bytes of output: over max_bytes
    assert gr(np.float32(1), [1] * k) == "python" and gr([1.0], [1] * k) == "python"
    group._in_flight.append("work")  # an all_reduce in flight: the method drains it first
    assert gr(x, [3] * k) == "python"
    assert len(group.seen) == calls and len(fallen) == 12
    group._in_flight.clear()
    for n in range(1, 20):  # at most 16 layouts kept
        np.testing.assert_array_equal(gr(np.full(n, n, np.int64), [n] * k), np.full(n * k, n, np.int64))
    assert gr.kept == 16
    shares = _native.MpiGatherRows(call, group, group.ranks, 1 << 12, lambda shape, dtype: np.empty(shape, dtype),
                                   fallback, functools.partial(pytest.fail, "no MPI error expected"), max_share_bytes=24)
    assert shares(x[:2], [2] * k).shape == (2 * k, 2)  # 16-byte shares: from C++
    assert shares(x, [3] * k) == "python"  # 24-byte shares go point to point in the method
    del keep


def test_all_reduce_in_cpp_takes_only_what_was_added():
    """MpiAllreduceFast matches (redop, dtype) by identity and falls back for anything else; through mpi4py's
    library on COMM_SELF, in a child process (MPI is not initialised in the test runner)."""
    pytest.importorskip("mpi4py")
    code = textwrap.dedent("""
        import functools, importlib, numpy as np
        from globaltensor import _native
        MPI = importlib.import_module("mpi4py.MPI")
        from globaltensor.distributed import mpi_direct
        comm = MPI.COMM_SELF.Dup()
        ag = mpi_direct.allgather(MPI, comm)
        x = np.arange(10, dtype=np.float32)
        out = np.empty(10, np.float32)
        assert ag(x, out) == 0 and (out == x).all()
        for bad in (np.empty(9, np.float32), np.empty(20, np.float32)[::2]):
            try:
                ag(x, bad)
                raise SystemExit("no error")
            except ValueError:
                pass
        class G:
            ranks, _in_flight, armed = (0,), [], None
        g = G()
        fast = _native.MpiAllreduceFast(g, g.ranks, 1 << 10, lambda x, out, r: "python",
                                        functools.partial(mpi_direct.check, MPI))
        for dtype in mpi_direct.DTYPES:
            call = mpi_direct.allreduce(MPI, comm, dtype, MPI.MAX)
            fast.add(_native.RedOp.max, dtype, call)
            a = np.arange(5).astype(dtype)
            o = np.zeros_like(a)
            assert call(a, o) == 0 and (o == a).all() and call(a, a) == 0 and (a == np.arange(5)).all()
            assert fast(a, a, _native.RedOp.max) is a and fast(a, o, _native.RedOp.max) is o and (o == a).all()
            assert fast(a, a, _native.RedOp.sum) == "python"
            try:
                call(a, np.zeros(5, np.float16))
                raise SystemExit("no error")
            except ValueError:
                pass
        assert fast(np.zeros(10, np.float32)[::2], np.zeros(5, np.float32), _native.RedOp.max) == "python"
        assert fast.size == 4 and g.armed is None
        assert fast(np.zeros(5, np.float16), np.zeros(5, np.float16), _native.RedOp.max) == "python"
        assert fast(np.zeros(300, np.float32), np.zeros(300, np.float32), _native.RedOp.max) == "python"
        g._in_flight.append(1)
        assert fast(np.zeros(5, np.float32), np.zeros(5, np.float32), _native.RedOp.max) == "python"
        try:
            mpi_direct.check(MPI, MPI.ERR_COUNT)
            raise SystemExit("no error")
        except MPI.Exception:
            pass
        print("ok")
    """)
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert got.returncode == 0 and got.stdout.strip().endswith("ok"), got.stdout + got.stderr
