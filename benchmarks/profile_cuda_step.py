"""Where the MLP step's time goes on a GPU: the host's time to enqueue a step and the GPU's time
to run it, ours (eager and traced) beside the step by hand in cupy (bench_cuda.py's MLP step,
1 rank), and a profile of the host's time in ours.

A spin kernel keeps the GPU busy while the host enqueues the steps, so the host's time is its
own; the steps' kernels then run back to back behind the spin, and the CUDA events around them
time the GPU's work alone. A step that waits for the GPU (a copy to the host, a synchronize)
takes as long as the spin: it is reported as "waits". The step's wall time (no spin) is the
larger of the two when the step does not wait. On simulated cupy (GLOBALTENSOR_CUDA_SIMULATE=1)
only the host's times are measured (there is no GPU), which checks the script and counts the
host's share.

    python benchmarks/profile_cuda_step.py [--steps 20] [--profile 25] [--json PATH]
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cuda  # noqa: E402
from _timing import cpu_name, print_table, write_json  # noqa: E402

_SPIN = r'''extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}'''


def _simulated():
    from globaltensor.backends.devices import simulated
    return simulated()


class Gpu:
    """The spin kernel and events of a real GPU (cupy)."""

    def __init__(self):
        import cupy
        self.cupy = cupy
        self.kernel = cupy.RawKernel(_SPIN, "spin")
        self.khz = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["clockRate"]

    def spin(self, seconds):
        import numpy as np
        self.kernel((1,), (1,), (np.int64(seconds * self.khz * 1e3),))

    def event(self):
        e = self.cupy.cuda.Event()
        e.record()
        return e

    def seconds(self, start, end):
        end.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, end) / 1e3

    def sync(self):
        self.cupy.cuda.Device().synchronize()


def measure(step, steps, gpu, profile=None):
    """(wall, host, device, waits) seconds per step; device and waits None without a GPU."""
    for _ in range(3):
        step()
    if gpu is None:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        host = (time.perf_counter() - start) / steps
        if profile is not None:
            _profiled(step, steps, profile)
        return host, host, None, None
    gpu.sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    gpu.sync()
    wall = (time.perf_counter() - start) / steps
    spin = max(0.05, 4 * steps * wall)  # longer than the host's enqueue, whatever it is
    gpu.spin(spin)
    begin = gpu.event()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    host = (time.perf_counter() - start) / steps
    device = gpu.seconds(begin, gpu.event()) / steps
    waits = host * steps > 0.5 * spin
    if profile is not None:
        gpu.spin(spin)
        _profiled(step, steps, profile)
    gpu.sync()
    return wall, host, device, waits


def _profiled(step, steps, lines):
    """The host's profile of `steps` steps, its top `lines` functions by own time, printed."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(lines)
    print(text.getvalue())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--profile", type=int, default=25, help="lines of the host profile of ours (0: none)")
    p.add_argument("--json", default="benchmarks/results/cuda_step.json")
    args = p.parse_args()
    simulated = _simulated()
    if simulated:
        from globaltensor.backends import simulated_cupy as by_hand_module
        gpu = None
    else:
        by_hand_module, gpu = None, Gpu()
    cases = [("by hand in cupy", bench_cuda.cupy_mlp_step(by_hand_module), None),
             ("ours eager", bench_cuda.mlp_step(False), "eager"), ("ours traced", bench_cuda.mlp_step(True), "traced")]
    rows = []
    for name, step, label in cases:
        if label is not None and args.profile:
            print(f"== host profile, {label}, {args.steps} steps")
        wall, host, device, waits = measure(step, args.steps, gpu, args.profile if label else None)
        ms = (lambda s: "-" if s is None else f"{s * 1e3:.3f}")
        bound = "-" if device is None else ("waits for the GPU" if waits else ("host" if host > device else "GPU"))
        rows.append([name, ms(wall), ms(host), ms(device), bound])
    d_in, hidden, d_out, batch = bench_cuda.MLP
    title = (f"MLP {d_in}-{hidden}-{d_out} batch {batch} fp32 step, 1 rank, ms per step "
             f"({'simulated cupy: host only' if simulated else 'GPU'}; host: {cpu_name()})")
    print_table(title, ["step", "wall", "host enqueue", "GPU work", "bound by"], rows)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
