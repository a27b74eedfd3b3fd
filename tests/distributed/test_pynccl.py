"""Our NCCL binding: buffers, the config prefix, finding and loading libnccl, unique ids through
the store (no GPU needed); communicators and collectives on GPUs (cuda marker)."""
import ctypes

import numpy as np
import pytest

from globaltensor.backends import cuda
from globaltensor.distributed import pynccl
from conftest import run_ranks


class FakeCudaArray:
    """Just enough of __cuda_array_interface__ to describe a buffer."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "version": 3}


def _nccl_or_skip():
    try:
        return pynccl.library()
    except RuntimeError as exc:
        pytest.skip(f"no NCCL library here: {exc}")


def test_buffer_reads_pointer_count_and_type():
    assert pynccl.buffer(FakeCudaArray((3, 5))) == (0x7F0000000000, 15, pynccl.DTYPES["float32"])
    assert pynccl.buffer(FakeCudaArray((2, 3), "<f4", (12, 4)))[1] == 6          # explicit C strides
    assert pynccl.buffer(FakeCudaArray((4,), "<u2"), dtype="bfloat16")[2] == 9   # bf16 as a uint16 view
    assert pynccl.buffer(FakeCudaArray((1 << 33,), "|i1"))[1] == 1 << 33          # counts are 64-bit
    with pytest.raises(ValueError, match="C-contiguous"):
        pynccl.buffer(FakeCudaArray((2, 3), "<f4", (4, 8)))
    with pytest.raises(TypeError, match="no complex64 type"):
        pynccl.buffer(FakeCudaArray((2,), "<c8"))
    with pytest.raises(TypeError, match="CUDA array"):
        pynccl.buffer(np.zeros(3))


def test_config_is_the_nccl_2_14_prefix():
    config = pynccl.Config.non_blocking()
    assert ctypes.sizeof(pynccl.Config) == config.size == 40 and config.magic == 0xCAFEBEEF
    assert config.version == 21400 and config.blocking == 0 and config.minCTAs == -2**31
    assert ctypes.sizeof(pynccl.UniqueId) == pynccl.UNIQUE_ID_BYTES == 128


def test_library_path_override_and_a_clear_error(monkeypatch, tmp_path):
    missing = str(tmp_path / "libnccl.so.2")
    monkeypatch.setenv("GLOBALTENSOR_NCCL_LIBRARY", missing)
    assert pynccl.library_path() == missing
    with pytest.raises(RuntimeError, match="NCCL could not be loaded from .*GLOBALTENSOR_NCCL_LIBRARY"):
        pynccl.Library(missing)


def test_version_and_unique_ids():
    lib = _nccl_or_skip()
    assert lib.version() >= (2, 14, 0)
    a, b = lib.unique_id(), lib.unique_id()
    assert len(a) == len(b) == 128 and a != b
    assert "ncclInvalidArgument" in lib.explain(4)


def _exchange():
    import globaltensor as gt
    uid, store = pynccl.shared_unique_id((0, 1, 2), "nccl/test/0")
    return gt.env.get_rank(), uid, store is not None


def test_unique_id_goes_through_the_store():
    _nccl_or_skip()
    results = run_ranks(_exchange, 3)
    assert len({uid for _, uid, _ in results}) == 1 and all(has_store for _, _, has_store in results)
    assert len(results[0][1]) == 128


def test_communicator_without_a_gpu_says_so():
    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match=r"an NCCL communicator for ranks \[0\] needs a CUDA GPU, but"):
        pynccl.communicator([0])


@pytest.mark.cuda
def test_one_rank_collectives_on_the_gpu():
    cupy = pytest.importorskip("cupy")
    _nccl_or_skip()
    comm = pynccl.communicator([0])
    x = cupy.arange(10, dtype=cupy.float32)
    comm.all_reduce(x)
    assert cupy.asnumpy(x).tolist() == list(range(10))
    out = cupy.empty(10, cupy.float32)
    comm.all_gather(x, out)
    comm.broadcast(out, src=0)
    assert cupy.asnumpy(out).tolist() == list(range(10))
    half = cupy.ones(4, cupy.uint16) * 0x3F80                        # bfloat16 1.0
    comm.all_reduce(half, dtype="bfloat16")
    assert cupy.asnumpy(half).tolist() == [0x3F80] * 4


def _per_gpu_all_reduce():
    import cupy
    import globaltensor as gt
    rank = gt.env.get_rank()
    cupy.cuda.Device(cuda.local_device()).use()
    comm = pynccl.communicator([0, 1])
    x = cupy.full(1 << 20, rank + 1, cupy.float32)
    comm.all_reduce(x)
    out = cupy.empty(2 << 20, cupy.float32)
    comm.all_gather(x, out)
    return float(x[0]), float(out[-1])


@pytest.mark.cuda
def test_two_ranks_on_two_gpus():
    pytest.importorskip("cupy")
    _nccl_or_skip()
    if cuda.device_count() < 2:
        pytest.skip("NCCL takes one rank per GPU; this machine has one")
    assert run_ranks(_per_gpu_all_reduce, 2) == [(3.0, 3.0), (3.0, 3.0)]


@pytest.mark.cuda
def test_agrees_with_cupy_nccl():
    cupy = pytest.importorskip("cupy")
    from cupy.cuda import nccl
    lib = _nccl_or_skip()
    assert lib.version() >= (2, 14, 0) and nccl.get_version() > 0
    comm = pynccl.communicator([0])
    x = cupy.random.standard_normal(1000, dtype=cupy.float32)
    ours, theirs = x.copy(), cupy.empty_like(x)
    comm.all_reduce(ours)
    peer = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    peer.allReduce(x.data.ptr, theirs.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                   cupy.cuda.get_current_stream().ptr)
    cupy.cuda.get_current_stream().synchronize()
    assert cupy.array_equal(ours, theirs)


class FakeNccl:
    """Stands in for Library: calls succeed, ncclCommGetAsyncError reports the given states."""

    def __init__(self, states):
        self._lib, self.states, self.aborted = self, list(states), False

    def call(self, name, *args, comm=None):
        return 0

    def ncclCommGetAsyncError(self, handle, state):
        state._obj.value = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return 0

    def ncclCommAbort(self, handle):
        self.aborted = True

    def explain(self, code, comm=None):
        return f"ncclInternalError ({code})"


class DictStore:
    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = bytes(value)

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        return [k in self.data for k in keys]


def test_a_collective_that_never_completes_times_out_names_the_missing_and_aborts():
    store, lib = DictStore(), FakeNccl([0, 7])            # init succeeds, then in progress forever
    comm = pynccl.Communicator(lib, [3, 5, 7], 3, bytes(128), timeout=1.3, store=store, key="nccl/t/0")
    store.set("nccl/t/0/at/1", b"1")                      # rank 5 reached this call too, rank 7 never did
    with pytest.raises(pynccl.CollectiveTimeoutError, match=r"all_reduce on ranks \[3, 5, 7\]: timed out after "
                       r"1\.\d s; rank\(s\) \[7\] did not arrive"):
        comm.all_reduce(FakeCudaArray((4,)), sync=False)
    assert lib.aborted and store.data["nccl/t/0/at/0"] == b"1"   # it published its own progress
    with pytest.raises(pynccl.CollectiveError, match="can no longer be used: all_reduce timed out"):
        comm.all_reduce(FakeCudaArray((4,)), sync=False)


def test_an_asynchronous_nccl_error_raises_with_its_text_and_aborts():
    lib = FakeNccl([0, 3])
    comm = pynccl.Communicator(lib, [0], 0, bytes(128), timeout=5)
    with pytest.raises(pynccl.NCCLError, match=r"NCCL broadcast on ranks \[0\]: ncclInternalError \(3\)"):
        comm.broadcast(FakeCudaArray((8,)), src=0, sync=False)
    assert lib.aborted
