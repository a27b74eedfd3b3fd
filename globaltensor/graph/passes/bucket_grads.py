"""Gradient buckets: the all_reduces that make gradients whole are packed into flat buffers,
each started (asynchronously) where its last gradient is final and awaited where the first
reduced gradient is used."""
import math

import numpy as np

from ... import grad_buckets
from ...grad_buckets import FlatBuffer, pack
from ...backends.devices import device
from ...boxing import _group
from ...env import get_rank
from ..program import Instr, Reg


def _member(program, ins, uses):
    """(placement, mesh axes, dtype) when ins sums a leaf's partial gradient over mesh axes
    (capture's reduce_grad) and its result only becomes a .grad (and an optimizer's update input)."""
    if ins.kind != "reduce":
        return None
    out = ins.outs[0]
    if out in program.outputs or not all(program.instrs[k].kind in ("grad", "update") for k in uses.get(out, ())):
        return None
    lay = program.regs[out].layout
    if lay.placement.mesh_coord(get_rank()) is None:
        return None
    return lay.placement, ins.detail, lay.dtype.np


def run(program):
    uses = program.uses()
    members = {}
    for i, ins in enumerate(program.instrs):
        key = _member(program, ins, uses)
        if key is not None:
            members.setdefault(key, []).append(i)
    limit = grad_buckets.bucket_bytes()
    producer = {r: ins for ins in program.instrs for r in ins.outs}
    starts, waits, gone, flats = {}, {}, set(), []
    written = 0
    for key in sorted(members, key=lambda k: members[k][0]):
        for bucket in _pack(program, members[key], limit):
            start, wait, flat = _bucket(program, key, bucket)
            written += _write_in_place(program, bucket, flat, uses, producer)
            starts.setdefault(bucket[-1], []).append(start)
            first_use = min(k for i in bucket for k in uses[program.instrs[i].outs[0]])
            waits.setdefault(first_use, []).append(wait)
            gone.update(bucket)
            flats.append(flat)
    instrs = [Instr("step", "bucket_buffers", _Prepare(flats), [], [])] if flats else []
    for i, ins in enumerate(program.instrs):
        instrs += waits.get(i, [])
        if i not in gone:
            instrs.append(ins)
        instrs += starts.get(i, [])
    program.instrs = instrs
    return {"buckets": len(flats), "all_reduces": len(gone), "written_in_place": written}


def _pack(program, positions, limit):
    """Consecutive members in buckets of at most `limit` bytes of global value (alike on every rank)."""
    sizes = []
    for i in positions:
        lay = program.regs[program.instrs[i].outs[0]].layout
        sizes.append(math.prod(lay.shape) * lay.dtype.itemsize)
    return pack(positions, sizes, lambda _: limit)


def _bucket(program, key, bucket):
    placement, mesh_dims, dtype = key
    ins = [program.instrs[i].ins[0] for i in bucket]
    outs = [program.instrs[i].outs[0] for i in bucket]
    shapes = [program.regs[r].local_shape for r in outs]
    group = _group(placement.axes_ranks(mesh_dims, placement.mesh_coord(get_rank())))
    handle = Reg(len(program.regs), "handle", None, np.empty(0, dtype))
    program.regs.append(handle)
    flat = _Flat(device(placement.type), shapes, dtype)
    nbytes = sum(math.prod(s) for s in shapes) * np.dtype(dtype).itemsize
    text = f"{len(bucket)} gradients, {nbytes} bytes, ranks {group.ranks}"
    start = Instr("start", "all_reduce", _Start(flat, group), ins, [handle.index], plain=True, detail=text)
    wait = Instr("wait", "all_reduce", _Wait(), [handle.index], outs)
    return start, wait, flat


def _write_in_place(program, bucket, flat, uses, producer):
    """Let the kernels that make the gradients write them into the bucket's buffer (out=, as
    eager mode's backward does): a matmul whose result only goes to the bucket. Returns how many."""
    count = 0
    for j, i in enumerate(bucket):
        r = program.instrs[i].ins[0]
        ins = producer.get(r)
        opdef = None if ins is None else ins.target
        if (ins is None or ins.kind != "op" or not ins.plain or opdef is None or not opdef.takes_hints
                or len(uses.get(r, ())) != 1 or program.regs[r].escapes or not program.regs[r].numpy):
            continue
        ins.fn = _IntoBucket(ins.fn, flat, j)
        program.regs[r].escapes = True  # its buffer is the bucket's: liveness never hands it out
        count += 1
    return count


class _Flat:
    """A bucket's FlatBuffer (grad_buckets), kept from replay to replay (the collectives know its
    memory: no fresh pages); prepare() makes a new one while a view handed out by the last replay
    is still held (a .grad somebody kept)."""

    def __init__(self, dev, shapes, dtype):
        self.dev, self.shapes, self.dtype = dev, shapes, dtype
        self.buffer = None

    @property
    def cuts(self):
        return self.buffer.cuts

    def prepare(self):
        if self.buffer is None or self.buffer.in_use():
            self.buffer = FlatBuffer(self.dev, self.shapes, self.dtype)


class _Prepare:
    """At the start of a replay: each bucket's buffer ready (before any kernel writes into it)."""

    def __init__(self, flats):
        self.flats = flats

    def __call__(self):
        for flat in self.flats:
            flat.prepare()


class _IntoBucket:
    """A takes_hints kernel given its gradient's view of the bucket buffer as out=."""

    def __init__(self, fn, flat, j):
        self.fn, self.flat, self.j = fn, flat, j

    def __call__(self, *pieces):
        return self.fn(*pieces, out=self.flat.buffer.views[self.j])


class _Start:
    """Copy into the bucket's buffer the gradients not written there already; start its all_reduce."""

    def __init__(self, flat, group):
        self.flat, self.group = flat, group

    def __call__(self, *pieces):
        buffer = self.flat.buffer
        for piece, view in zip(pieces, buffer.views):
            if piece is not view:
                view[...] = piece
        return self.flat.dev.collectives.all_reduce_async(buffer.flat, group=self.group), buffer


class _Wait:
    """Wait for the bucket; each gradient is a fresh view of the reduced buffer (so a view still
    held at the next replay is seen: FlatBuffer.in_use)."""

    def __call__(self, handle):
        work, buffer = handle
        work.wait()
        return [buffer.flat[a:b].reshape(s) for a, b, s in buffer.cuts]
