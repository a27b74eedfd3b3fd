"""Shared benchmark helpers: median timing of a collective and table printing."""
import json
import os
import socket
import statistics
import subprocess
import time

SIZES = [8, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
ITERS = {8: 3000, 4 << 10: 2000, 64 << 10: 500, 1 << 20: 100, 16 << 20: 20, 64 << 20: 8}


def call_seconds(fn, iters, barrier, warmup=3):
    """Per-call times of `iters` calls after a warm-up; a barrier first so ranks start together."""
    for _ in range(warmup):
        fn()
    barrier()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def median_seconds(fn, iters, barrier, warmup=3):
    """Median of per-call times after a warm-up; a barrier first so ranks start together."""
    return statistics.median(call_seconds(fn, iters, barrier, warmup))


def window_rate(step, iters, barrier, warmup=3, windows=5):
    """Calls per second: the median over `windows` timed windows of `iters` calls, after `warmup`
    calls, every window between barriers (so ranks time the same work)."""
    for _ in range(warmup):
        step()
    rates = []
    for _ in range(windows):
        barrier()
        t = time.perf_counter()
        for _ in range(iters):
            step()
        barrier()
        rates.append(iters / (time.perf_counter() - t))
    return statistics.median(rates)


def heap_array(shape, dtype):
    """An array whose memory numpy did not allocate (a bytearray's): collectives stage it."""
    import numpy as np
    n = shape[0] if isinstance(shape, tuple) else shape
    return np.frombuffer(bytearray(n * np.dtype(dtype).itemsize), dtype, count=n)


def human_size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def human_time(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.2f} us" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def cpu_name():
    """lscpu's model name with its family and model numbers ("AMD EPYC" alone names several)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    get = lambda k: fields.get(k, "?").strip()  # noqa: E731
    return f"{get('Model name')} (family {get('CPU family')} model {get('Model')}, {get('CPU(s)')} CPUs)"


def print_table(title, header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"\n{title}")
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


def free_port():
    """A TCP port free right now on this machine (for a peer's own rendezvous)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_torch_peer(worker, args):
    """(figures, description) of `worker(*args, port)` on 2 ranks, or ({}, why) without torch."""
    try:
        import torch
    except ImportError:
        return {}, "DTensor: torch not importable"
    from globaltensor.distributed import spawn
    figures = spawn(worker, args=(*args, free_port()), nprocs=2, timeout=900)[0]
    return figures, f"DTensor (torch {torch.__version__}, gloo)"


def write_json(path, data):
    """Write the figures of a run next to its table."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    print(f"\nwrote {path}")
