"""ZeroMQ message framing: a JSON header and raw zero-copy array frames, authenticated with Poly1305 (never pickle)."""
from __future__ import annotations

import hmac
import json
import logging
import math
import os
import struct

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.poly1305 import Poly1305

from .errors import PSError

LOG = logging.getLogger("globaltensor.ps")
DTYPES = ("float32", "float64", "int64", "int32", "float16", "bfloat16")
NONCE_SIZE = 16
MAC_SIZE = NONCE_SIZE + 16  # the mac frame: a fresh random nonce, then the Poly1305 tag
_KDF_LABEL = b"globaltensor.ps poly1305 key\0"


class WireError(ValueError):
    """A message that fails its MAC or names an array we do not accept; the receiver drops it."""


def _dtype(name: str) -> np.dtype:
    if name not in DTYPES:
        raise WireError(f"dtype {name!r} is not one of {DTYPES}")
    if name == "bfloat16":
        import ml_dtypes  # only when a bfloat16 array travels
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _authenticator(secret: bytes, nonce: bytes, frames) -> Poly1305:
    """Poly1305 over the frame count, every frame's length, then the frames, keyed with a one-time key.

    Poly1305 must never see two messages under one key: each message's key is HMAC-SHA256(secret, label + nonce)
    of its own random 128-bit nonce (a PRF of the secret, as ChaCha20-Poly1305 derives its key from a nonce).
    Poly1305 hashes ~7x faster than HMAC-SHA256 on large frames; the lengths stop bytes moving between frames."""
    mac = Poly1305(hmac.digest(secret, _KDF_LABEL + nonce, "sha256"))
    mac.update(struct.pack(f"<{len(frames) + 1}Q", len(frames), *(_nbytes(f) for f in frames)))
    for f in frames:
        mac.update(f)
    return mac


def _nbytes(frame) -> int:
    return frame.nbytes if hasattr(frame, "nbytes") else len(frame)


def _mac(secret: bytes, frames) -> bytes:
    nonce = os.urandom(NONCE_SIZE)
    return nonce + _authenticator(secret, nonce, frames).finalize()


def _verified(secret: bytes, frames, mac) -> bool:
    mac = bytes(mac)
    if len(mac) != MAC_SIZE:
        return False
    try:
        _authenticator(secret, mac[:NONCE_SIZE], frames).verify(mac[NONCE_SIZE:])  # constant-time compare
    except InvalidSignature:
        return False
    return True


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
    if not _verified(secret, bufs[:-1], bufs[-1]):
        raise WireError("the message's MAC does not match the job's secret")
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


def recv_reply(sock, secret: bytes):
    """A server's reply on a trainer's socket: (header, arrays), None when dropped; an error reply raises PSError."""
    msg = recv(sock, secret)
    if msg is None:
        return None
    _, header, arrays = msg
    if header.get("op") == "error":
        raise PSError(header.get("error", "a parameter server failed"))
    return header, arrays


def send(sock, secret: bytes, header: dict, arrays=(), ident: bytes | None = None, flags: int = 0) -> None:
    frames = pack(secret, header, arrays)
    if ident is not None:
        frames.insert(0, ident)
    sock.send_multipart(frames, flags=flags, copy=False)
