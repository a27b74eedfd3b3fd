"""The IPC all-reduce protocol, host-synchronised: on its numpy twin (host shared memory) with 2-4
processes, every size (one-shot, two-shot, chunked) and dtype, in place or not, bit-equal to
the sum in rank order; on a GPU (cuda marker) with several processes sharing it."""
import ml_dtypes
import numpy as np
import pytest

from conftest import rank_data, run_ranks

DTYPES = ["float32", "float64", "float16", ml_dtypes.bfloat16, "int32", "int64"]
COUNTS = [0, 1, 7, 100, 128, 129, 1000, 5000]   # with capacity 2 KiB and one-shot 512 B


def _cases():
    return [(count, dtype) for dtype in DTYPES for count in COUNTS]


def _expected(seed, count, dtype, k):
    dtype = np.dtype(dtype)
    parts = [rank_data(seed, r, (count,), dtype) for r in range(k)]
    acc = parts[0].astype(np.float32 if dtype.itemsize == 2 else dtype)
    for p in parts[1:]:
        acc += p
    return acc.astype(dtype)


def _all_sizes(device_kind):
    import globaltensor as gt
    from globaltensor.distributed.ipc_allreduce import CudaDevice, HostDevice, IpcAllReduce
    rank, k = gt.env.get_rank(), gt.env.get_world_size()
    device = HostDevice() if device_kind == "host" else CudaDevice()
    ar = IpcAllReduce(list(range(k)), capacity=2048, device=device, oneshot_bytes=512)
    results = []
    for seed, (count, dtype) in enumerate(_cases()):
        x = rank_data(seed, rank, (count,), dtype)
        if device_kind == "host":
            out = np.empty_like(x)
            ar(x, out)
            y = x.copy()
            ar(y)                                        # in place
            results.append((out, y))
        else:  # cupy has no bfloat16: such buffers travel as uint16, the protocol is told the dtype
            import cupy
            xd = cupy.asarray(x.view(np.uint16) if x.dtype == ml_dtypes.bfloat16 else x)
            out = cupy.empty_like(xd)
            ar.all_reduce(device.pointer(xd), device.pointer(out), count, x.dtype)
            host = cupy.asnumpy(out).view(x.dtype)
            results.append((host, host))
    ar.close()
    return results


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_every_size_and_dtype_equals_the_rank_order_sum(nprocs):
    results = run_ranks(_all_sizes, nprocs, "host", timeout=240)
    for seed, (count, dtype) in enumerate(_cases()):
        want = _expected(seed, count, dtype, nprocs)
        for rank_results in results:
            out, in_place = rank_results[seed]
            assert out.dtype == want.dtype and np.array_equal(out.view(np.uint8), want.view(np.uint8)), (count, dtype)
            assert np.array_equal(in_place.view(np.uint8), want.view(np.uint8)), (count, dtype)


def _mismatch():
    import globaltensor as gt
    from globaltensor.distributed.ipc_allreduce import HostDevice, IpcAllReduce
    rank = gt.env.get_rank()
    ar = IpcAllReduce([0, 1], capacity=1024, device=HostDevice())
    try:
        ar(np.zeros(10 + rank, np.float32))
        error = None
    except ValueError as exc:
        error = str(exc)
    ar(np.ones(3, np.float32))                          # the group still works
    ar.close()
    return error


def test_different_buffers_raise_on_every_rank_before_moving_data():
    for error in run_ranks(_mismatch, 2):
        assert error is not None and "rank 0: 10 x float32, rank 1: 11 x float32" in error


def test_split_covers_every_element_once():
    from globaltensor.distributed.ipc_allreduce import split
    for count in (0, 1, 63, 64, 65, 1000):
        for k in (1, 2, 3, 4):
            ranges = [split(count, k, i, 64) for i in range(k)]
            assert ranges[0][0] == 0 and ranges[-1][1] == count
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert all(lo % 64 == 0 for lo, _ in ranges if lo < count)


@pytest.mark.cuda
@pytest.mark.parametrize("nprocs", [2, 4])
def test_processes_sharing_one_gpu(nprocs):
    pytest.importorskip("cupy")
    from globaltensor import _native
    if not _native.with_cuda:
        pytest.skip("_native was built without CUDA")
    results = run_ranks(_all_sizes, nprocs, "cuda", timeout=240)
    for seed, (count, dtype) in enumerate(_cases()):
        want = _expected(seed, count, dtype, nprocs)
        for rank_results in results:
            got = rank_results[seed][0]
            if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize == 2:
                np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2)
            else:
                np.testing.assert_array_equal(got, want)


def _reads_seen(log_dir):
    """Rank 1's device reads slowly and logs each read; after each call every rank counts the
    reads logged: a call may return on rank 0 only once rank 1 stopped reading its buffer."""
    import os
    import time

    import globaltensor as gt
    from globaltensor.distributed.ipc_allreduce import HostDevice, IpcAllReduce
    rank, log = gt.env.get_rank(), os.path.join(log_dir, "reads")

    class SlowReader(HostDevice):
        def copy(self, dst, src, nbytes):
            self._slowly(lambda: HostDevice.copy(self, dst, src, nbytes))

        def reduce(self, dst, srcs, count, dtype):
            self._slowly(lambda: HostDevice.reduce(self, dst, srcs, count, dtype))

        def _slowly(self, read):
            if rank == 1:
                time.sleep(0.05)
            read()
            if rank == 1:
                with open(log, "a") as f:
                    f.write("read\n")

    ar = IpcAllReduce([0, 1], capacity=2048, device=SlowReader(), oneshot_bytes=512)
    seen = []
    for count in (64, 300, 1000):  # one-shot, two-shot, two chunks
        ar(np.ones(count, np.float32))
        seen.append(sum(1 for _ in open(log)) if os.path.exists(log) else 0)
    ar.close()
    return seen


def test_a_call_returns_only_when_no_peer_reads_its_buffer(tmp_path):
    """So a rank may free its buffer (close, or exit) as soon as its call returned."""
    on_rank0, on_rank1 = run_ranks(_reads_seen, 2, str(tmp_path))
    assert on_rank0 == on_rank1 and on_rank1[0] > 0, (on_rank0, on_rank1)


def _release_and_again():
    import os

    import globaltensor as gt
    from globaltensor.backends.devices import device
    from globaltensor.distributed import device_collectives, ipc_allreduce
    device_collectives.transport = lambda ranks: "ipc"  # the IPC transport on its host twin
    ipc_allreduce.CudaDevice = ipc_allreduce.HostDevice
    dev, rank = device("cuda"), gt.env.get_rank()

    def summed():
        return dev.to_host(device_collectives.all_reduce(dev.from_host(np.arange(1000, dtype=np.float32) * (rank + 1))))

    first = summed()
    group = device_collectives._ipc[(0, 1)]
    made = len(group.buffers)
    own_file = group.device._maps[group.buffers[group.index]][1]  # its name, checked by stat (no directory listing)
    device_collectives.release()
    gt.env.barrier()
    left = len(group.buffers) + os.path.exists(own_file)
    groups = len(device_collectives._ipc)
    again = summed()
    device_collectives.release()
    return first, again, made, left, groups, bool(device_collectives._release_registered)


def test_release_frees_the_ipc_buffers_and_a_later_call_makes_them_anew():
    """device_collectives.release(), which runs at a rank's exit, frees the group's buffers."""
    want = np.arange(1000, dtype=np.float32) * 3
    for first, again, made, left, groups, registered in run_ranks(_release_and_again, 2,
                                                                  env={"GLOBALTENSOR_CUDA_SIMULATE": "1"}):
        np.testing.assert_array_equal(first, want)
        np.testing.assert_array_equal(again, want)
        assert (made, left, groups, registered) == (2, 0, 0, True)
