"""The IPC all-reduce's phases timed one by one, 2 processes sharing one GPU (issue 33): where the
time of `bench_cuda.py`'s IPC row goes. Needs a GPU, cupy and _native built with CUDA.

    python benchmarks/bench_ipc_phases.py

Prints, per size and rank, the median milliseconds of the whole call, the copy into the rank's
IPC buffer, the host barrier, the sum of its slice, the (count, dtype) check and the copy out.
"""
import statistics
import time

import numpy as np


def _phases(nbytes, iters=10):
    import cupy
    import globaltensor as gt
    from globaltensor.distributed import collectives, ipc_allreduce
    ar = ipc_allreduce.IpcAllReduce([0, 1], capacity=nbytes)
    x = cupy.ones(nbytes // 4, cupy.float32)
    dev, mine, f32 = ar.device, ar.buffers[ar.index], np.dtype("float32")
    count, at = x.size, dev.pointer(x)

    def median_ms(fn):
        fn()
        cupy.cuda.Device().synchronize()
        collectives.barrier()
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return round(statistics.median(times) * 1e3, 3)

    def copy_in():
        dev.copy(mine, at, nbytes)
        dev.sync()

    def reduce_slice():
        lo, hi = ipc_allreduce.split(count, 2, ar.index, 64)
        dev.reduce(mine + lo * 4, [b + lo * 4 for b in ar.buffers], hi - lo, f32)
        dev.sync()

    def copy_out():
        for j, b in enumerate(ar.buffers):
            lo, hi = ipc_allreduce.split(count, 2, j, 64)
            dev.copy(at + lo * 4, b + lo * 4, (hi - lo) * 4)
        dev.sync()

    out = {"total": median_ms(lambda: ar(x)), "copy_in+sync": median_ms(copy_in),
           "barrier": median_ms(lambda: collectives.barrier(ar.group)), "reduce_slice+sync": median_ms(reduce_slice),
           "agree": median_ms(lambda: ar._agree(count, f32)), "copy_out+sync": median_ms(copy_out)}
    ar.close()
    return gt.env.get_rank(), out


def main():
    from globaltensor.distributed import spawn
    for nbytes in (1 << 20, 8 << 20, 64 << 20):
        for rank, phases in spawn(_phases, args=(nbytes,), nprocs=2, timeout=300):
            print(f"{nbytes >> 20} MiB rank {rank}: {phases}")


if __name__ == "__main__":
    main()
