"""Which OpenBLAS kernel numpy runs on: some bit-for-bit claims about GEMM blocks hold on some kernels only."""
import ctypes

import numpy as np

# kernels on which a GEMM over whole blocks was checked to give the bits of the same rows inside a larger GEMM
# (OPENBLAS_CORETYPE=... over tests/ops/test_kernels_s4.py); Haswell and Zen (AMD Zen 3) round otherwise
SAME_BITS_PER_BLOCK = ("SkylakeX", "Cooperlake", "SapphireRapids", "Sandybridge")


def openblas_core():
    """numpy's OpenBLAS kernel name (e.g. "SkylakeX", "Zen"), or None when numpy's BLAS is another."""
    np.dot(np.ones(2), np.ones(2))  # the library is loaded
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()}
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                     "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode().strip()
    return None


def gemm_blocks_keep_bits():
    """True on the kernels where whole GEMM blocks were seen to keep their bits (SAME_BITS_PER_BLOCK)."""
    core = openblas_core()
    return core is not None and core.lower() in {c.lower() for c in SAME_BITS_PER_BLOCK}
