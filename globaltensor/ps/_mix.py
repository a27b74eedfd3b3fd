"""Stable 64-bit mixing (splitmix64) and name hashes: every PS decision that must agree across processes derives from these."""
import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_TOP53 = np.uint64(11)


def splitmix64(x):
    """splitmix64 of each element of a uint64 array (wrapping arithmetic, a new array)."""
    z = np.array(x, dtype=np.uint64)  # a copy: mixed in place below
    z += _GOLDEN
    t = z >> _S30
    z ^= t
    z *= _MUL1
    np.right_shift(z, _S27, out=t)
    z ^= t
    z *= _MUL2
    np.right_shift(z, _S31, out=t)
    z ^= t
    return z


def as_u64(ids):
    """int64 ids (any value, negative ones too) as their uint64 bit patterns, 1-D."""
    return np.ascontiguousarray(ids, dtype=np.int64).reshape(-1).view(np.uint64)


def name_hash(*parts):
    """A stable uint64 of strings and ints (never Python's salted hash): the same on every process."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return np.uint64(int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little"))


def unit_floats(bits):
    """uint64 random bits -> float64 in [0, 1) from their top 53 bits."""
    return (bits >> _TOP53).astype(np.float64) * (1.0 / (1 << 53))


def unit_floats32(bits, n):
    """The first n of the 32-bit halves of uint64 draws (k, m) as float32 in [0, 1) from their top 24 bits: (k, n)."""
    halves = np.ascontiguousarray(bits).view(np.uint32)[:, :n] >> np.uint32(8)
    out = halves.astype(np.float32)
    out *= np.float32(1.0 / (1 << 24))
    return out
