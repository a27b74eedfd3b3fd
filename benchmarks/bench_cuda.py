"""GPU figures of issue 6, against cupy (cuBLAS) in the same run; needs a GPU, cupy and a _native
built with CUDA and cuBLASLt (GLOBALTENSOR_BUILD_CUDA=1, GLOBALTENSOR_CUBLAS_INCLUDE if the
toolkit has no cublasLt.h).

    python benchmarks/bench_cuda.py [--size 8192] [--json benchmarks/results/cuda.json]

* matmul n^3 (bf16, fp16, fp32 with TF32): ours (cuBLASLt) vs cupy.matmul (cuBLAS; torch.matmul
  for bf16, which cupy lacks), TFLOP/s.
* fused linear (matmul + bias + GELU-tanh, bf16): one cuBLASLt call vs cupy's matmul, bias add and
  GELU as separate kernels.
* IPC all_reduce of 64 MiB float32 between 2 processes sharing the GPU: algorithm bandwidth
  (bytes / time) next to a device-to-device copy's.
* A training step of the MLP 1024-4096-1024 (batch 256, fp32, SGD) on placement("cuda", ...) with
  1 rank and with 2 ranks sharing the GPU, against the same step written by hand in cupy.
* A cached op's wall time on placement("cuda", [0]) against torch DTensor on the same GPU.
CUDA events time every kernel (median of 20 after 3 warm-ups); the training step is wall time.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, write_json  # noqa: E402


def gpu_seconds(fn, iters=20, warmup=3):
    import cupy
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


def _operands(n, dtype):
    import cupy
    import ml_dtypes
    rng = cupy.random.default_rng(0)
    if dtype == "bfloat16":  # cupy has no bfloat16: bits of float32 values rounded on the host
        host = [cupy.asnumpy(rng.standard_normal(s, dtype=cupy.float32)).astype(ml_dtypes.bfloat16).view("uint16")
                for s in ((n, n), (n, n), (n,))]
        return [cupy.asarray(h) for h in host]
    return [rng.standard_normal(s, dtype=cupy.float32).astype(dtype) for s in ((n, n), (n, n), (n,))]


def matmul_rows(n):
    import cupy
    from globaltensor.backends import cuda_kernels as ck
    rows = []
    for dtype in ("bfloat16", "float16", "float32"):
        a, b, _ = _operands(n, dtype)
        flops = 2 * n ** 3
        ours = gpu_seconds(lambda: ck.matmul(a, b, dtype=dtype))  # float32 without TF32, as cupy's
        if dtype == "bfloat16":  # cupy has no bfloat16: torch's cuBLAS on the same bits is the peer
            peer = _torch_bf16_matmul_seconds(a, b)
        else:
            peer = gpu_seconds(lambda: cupy.matmul(a, b))
        rows.append([f"matmul {n}^3 {dtype}", f"{flops / ours / 1e12:.0f}",
                     "-" if peer is None else f"{flops / peer / 1e12:.0f}",
                     "-" if peer is None else f"{peer / ours:.2f}x"])
    return rows


def _torch_bf16_matmul_seconds(a, b):
    """torch.matmul on the same bfloat16 bits (zero-copy through DLPack); None without torch."""
    try:
        import torch
    except ImportError:
        return None
    ta, tb = (torch.from_dlpack(m).view(torch.bfloat16) for m in (a, b))
    return gpu_seconds(lambda: torch.matmul(ta, tb))


def op_overhead_rows(iters=3000):
    """Wall time per cached op (x + y, 64 floats, one rank) on placement("cuda", [0]) against
    torch DTensor on a 1-GPU DeviceMesh: the host cost of dispatch, the kernel is tiny."""
    import time

    import cupy
    import globaltensor as gt
    pl = gt.placement("cuda", [0])
    x = gt.randn(64, placement=pl, sbp=gt.sbp.broadcast)
    y = gt.randn(64, placement=pl, sbp=gt.sbp.broadcast)

    def per_call(fn):
        for _ in range(100):
            fn()
        cupy.cuda.Device().synchronize()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(iters):
                fn()
            cupy.cuda.Device().synchronize()
            times.append((time.perf_counter() - t) / iters)
        return statistics.median(times)

    ours = per_call(lambda: x + y)
    peer = None
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.tensor import DeviceMesh, Replicate, distribute_tensor
        if not dist.is_initialized():
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        mesh = DeviceMesh("cuda", [0])
        tx, ty = (distribute_tensor(torch.randn(64, device="cuda"), mesh, [Replicate()]) for _ in range(2))
        peer = per_call(lambda: tx + ty)
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - the row says why the peer is missing
        print(f"DTensor peer unavailable: {type(exc).__name__}: {exc}")
    return [["cached op x + y (64 floats), 1 rank, per call", f"{ours * 1e6:.1f} us",
             "-" if peer is None else f"DTensor {peer * 1e6:.1f} us", "-" if peer is None else f"{peer / ours:.2f}x"]]


def fused_linear_rows(n):
    """float16: cupy has no bfloat16 for the unfused peer; the issue's bf16 figure is the same call."""
    import cupy
    from globaltensor.backends import cuda_kernels as ck
    x, w, b = _operands(n, "float16")
    gelu = cupy.ElementwiseKernel("T y", "T z", "z = 0.5f * y * (1.f + tanhf(0.7978845608f * (y + 0.044715f * y * y * y)))",
                                  "gelu_tanh")
    ours = gpu_seconds(lambda: ck.linear(x, w, b, "gelu_tanh"))
    peer = gpu_seconds(lambda: gelu(cupy.matmul(x, w.T) + b))
    return [[f"linear+bias+GELU {n}^3 float16", f"{2 * n ** 3 / ours / 1e12:.0f}", f"{2 * n ** 3 / peer / 1e12:.0f}",
             f"{peer / ours:.2f}x"]]


def _ipc_worker(nbytes):
    import cupy
    import globaltensor as gt
    from globaltensor.distributed import ipc_allreduce
    ar = ipc_allreduce.IpcAllReduce([0, 1], capacity=nbytes)
    x = cupy.ones(nbytes // 4, cupy.float32)
    seconds = gpu_seconds(lambda: ar(x), iters=10)
    copy = gpu_seconds(lambda: cupy.copyto(cupy.empty_like(x), x), iters=10)
    ar.close()
    return gt.env.get_rank(), seconds, copy


def ipc_rows(nbytes=64 << 20):
    from globaltensor.distributed import spawn
    results = spawn(_ipc_worker, args=(nbytes,), nprocs=2, timeout=600)
    seconds = max(r[1] for r in results)
    copy = min(r[2] for r in results)
    copy_bw = 2 * nbytes / copy  # bytes read and written
    return [[f"IPC all_reduce {nbytes >> 20} MiB float32, 2 procs on 1 GPU", f"{nbytes / seconds / 1e9:.0f} GB/s",
             f"copy {copy_bw / 1e9:.0f} GB/s", f"{nbytes / seconds / copy_bw:.2f} of copy"]]


MLP = (1024, 4096, 1024, 256)  # in, hidden, out, global batch


def mlp_step(traced=False):
    """ours: the MLP step on placement("cuda", every rank) as a function of no arguments, eager
    (forward, backward, SGD step, zero_grad) or traced once and replayed (gt.nn.Graph)."""
    import globaltensor as gt
    import globaltensor.nn as nn
    d_in, hidden, d_out, batch = MLP
    pl = gt.placement("cuda", list(range(gt.env.get_world_size())))
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out)).to_global(pl, gt.sbp.broadcast)
    opt, loss_fn = gt.optim.SGD(model.parameters(), lr=1e-3), nn.MSELoss()
    x = gt.randn(batch, d_in, placement=pl, sbp=gt.sbp.split(0))
    y = gt.randn(batch, d_out, placement=pl, sbp=gt.sbp.split(0))

    class Step(nn.Graph):  # the same step captured once and replayed (gt.nn.Graph)
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()
            return loss

    def eager():
        loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    return (lambda graph: lambda: graph(x, y))(Step()) if traced else eager


def cupy_mlp_step(cupy=None):
    """The same step by hand: forward, backward and SGD as cupy expressions (one process); `cupy`
    may be another module with its API (globaltensor.backends.simulated_cupy)."""
    import numpy as np
    if cupy is None:
        import cupy
    d_in, hidden, d_out, batch = MLP
    r = np.random.default_rng(0)
    w1, b1 = cupy.asarray(r.standard_normal((hidden, d_in), np.float32) * 0.03), cupy.zeros(hidden, np.float32)
    w2, b2 = cupy.asarray(r.standard_normal((d_out, hidden), np.float32) * 0.015), cupy.zeros(d_out, np.float32)
    x, y = (cupy.asarray(r.standard_normal(shape, np.float32)) for shape in ((batch, d_in), (batch, d_out)))

    def step():
        h = x @ w1.T + b1
        a = cupy.maximum(h, 0)
        d = (a @ w2.T + b2 - y) * (2.0 / (batch * d_out))
        dh = (d @ w2) * (h > 0)
        for p, g in ((w2, d.T @ a), (b2, d.sum(0)), (w1, dh.T @ x), (b1, dh.sum(0))):
            p -= 1e-3 * g

    return step


def _wall_seconds(step, steps, barrier=None):
    """Seconds per step, from the first enqueued to the GPU's end (after 3 steps of warm-up)."""
    import time

    import cupy
    for _ in range(3):
        step()
    cupy.cuda.Device().synchronize()
    if barrier is not None:
        barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - start) / steps


def _train_worker(steps, traced=False):
    import globaltensor as gt
    return _wall_seconds(mlp_step(traced), steps, gt.env.barrier)


def _cupy_step_seconds(steps):
    return _wall_seconds(cupy_mlp_step(), steps)


def training_rows(steps=50):
    from globaltensor.distributed import spawn
    by_hand = _cupy_step_seconds(steps)
    rows = []
    for nprocs, traced in ((1, False), (1, True), (2, False), (2, True)):
        seconds = max(spawn(_train_worker, args=(steps, traced), nprocs=nprocs, timeout=600))
        rows.append([f"MLP step 1024-4096-1024 batch 256 fp32, {nprocs} rank(s) on 1 GPU"
                     f"{', traced' if traced else ''}", f"{seconds * 1e3:.2f} ms", f"{by_hand * 1e3:.2f} ms by hand",
                     f"{by_hand / seconds:.2f}x"])
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--json", default="benchmarks/results/cuda.json")
    args = p.parse_args()
    rows = matmul_rows(args.size) + fused_linear_rows(args.size) + ipc_rows() + training_rows() + op_overhead_rows()
    print_table("GPU kernels (TFLOP/s or bandwidth; ratio > 1: ours faster)", ["case", "ours", "peer", "ratio"], rows)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
