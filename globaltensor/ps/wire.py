"""ZeroMQ message framing: a JSON header and raw zero-copy array frames, signed with HMAC-SHA256 (never pickle)."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math

import numpy as np

LOG = logging.getLogger("globaltensor.ps")
DTYPES = ("float32", "float64", "int64", "int32", "float16", "bfloat16")
MAC_SIZE = 32


class WireError(ValueError):
    """A message that fails its MAC or names an array we do not accept; the receiver drops it."""


def _dtype(name: str) -> np.dtype:
    if name not in DTYPES:
        raise WireError(f"dtype {name!r} is not one of {DTYPES}")
    if name == "bfloat16":
        import ml_dtypes  # only when a bfloat16 array travels
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _mac(secret: bytes, frames) -> bytes:
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for f in frames:
        mac.update(f)
    return mac.digest()


def pack(secret: bytes, header: dict, arrays=()) -> list:
    """[header json, *array buffers, mac]; arrays are sent as their own buffers (no copy of C-contiguous ones)."""
    bufs, meta = [], []
    for a in arrays:
        a = np.ascontiguousarray(a)
        name = a.dtype.name
        _dtype(name)
        meta.append([name, list(a.shape)])
        bufs.append(a.reshape(-1).view(np.uint8))  # bytes of any dtype, no copy
    head = json.dumps({**header, "arrays": meta}, separators=(",", ":")).encode()
    frames = [head, *bufs]
    frames.append(_mac(secret, frames))
    return frames


def unpack(secret: bytes, frames) -> tuple[dict, list]:
    """(header, arrays) of a received message (bytes or zmq.Frame each); WireError if it must be dropped."""
    bufs = [f.buffer if hasattr(f, "buffer") else f for f in frames]
    if len(bufs) < 2:
        raise WireError(f"a message of {len(bufs)} frame(s): expected a header and a MAC")
    if not hmac.compare_digest(_mac(secret, bufs[:-1]), bytes(bufs[-1])):
        raise WireError("the message's HMAC does not match the job's secret")
    try:
        header = json.loads(bytes(bufs[0]))
        meta = header.pop("arrays")
    except (ValueError, KeyError, AttributeError) as e:
        raise WireError(f"an unreadable header: {e}") from None
    if not isinstance(meta, list) or len(meta) != len(bufs) - 2:
        raise WireError(f"the header lists {meta!r} but {len(bufs) - 2} array frames came")
    arrays = []
    for (name, shape), buf in zip(meta, bufs[1:-1]):
        dt = _dtype(name)
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise WireError(f"a bad shape {shape!r}")
        if len(buf) != math.prod(shape) * dt.itemsize:
            raise WireError(f"an array frame of {len(buf)} bytes for {name}{tuple(shape)}")
        arrays.append(np.frombuffer(buf, dtype=dt).reshape(shape))
    return header, arrays


def recv(sock, secret: bytes, routed: bool = False):
    """One message from sock: (identity or None, header, arrays), or None when it was dropped (logged)."""
    frames = sock.recv_multipart(copy=False)
    ident = None
    if routed:
        ident, frames = frames[0].bytes, frames[1:]
    try:
        header, arrays = unpack(secret, frames)
    except WireError as e:
        LOG.warning("globaltensor.ps: dropped a message: %s", e)
        return None
    return ident, header, arrays


def send(sock, secret: bytes, header: dict, arrays=(), ident: bytes | None = None, flags: int = 0) -> None:
    frames = pack(secret, header, arrays)
    if ident is not None:
        frames.insert(0, ident)
    sock.send_multipart(frames, flags=flags, copy=False)
