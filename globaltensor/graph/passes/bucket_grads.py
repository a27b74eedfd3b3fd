"""Gradient buckets: the all_reduces that make gradients whole are packed into flat buffers,
each started (asynchronously) where its last gradient is final and awaited where the first
reduced gradient is used."""
import math
import sys

import numpy as np

from ... import autograd
from ...backends.devices import device
from ...boxing import _group
from ...env import get_rank
from ..program import Instr, Reg


def _member(program, ins, uses):
    """(placement, mesh axes, dtype) when ins sums a leaf's partial gradient over mesh axes
    (capture's reduce_grad) and its result only becomes a .grad."""
    if ins.kind != "reduce":
        return None
    out = ins.outs[0]
    if out in program.outputs or not all(program.instrs[k].kind == "grad" for k in uses.get(out, ())):
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
    limit = autograd.BUCKET_BYTES[0]
    starts, waits, gone = {}, {}, set()
    count = 0
    for key in sorted(members, key=lambda k: members[k][0]):
        for bucket in _pack(program, members[key], limit):
            start, wait = _bucket(program, key, bucket)
            starts.setdefault(bucket[-1], []).append(start)
            first_use = min(k for i in bucket for k in uses[program.instrs[i].outs[0]])
            waits.setdefault(first_use, []).append(wait)
            gone.update(bucket)
            count += 1
    instrs = []
    for i, ins in enumerate(program.instrs):
        instrs += waits.get(i, [])
        if i not in gone:
            instrs.append(ins)
        instrs += starts.get(i, [])
    program.instrs = instrs
    return {"buckets": count, "all_reduces": len(gone)}


def _pack(program, positions, limit):
    """Consecutive members in buckets of at most `limit` bytes of global value (alike on every rank)."""
    buckets, current, size = [], [], 0
    for i in positions:
        lay = program.regs[program.instrs[i].outs[0]].layout
        n = math.prod(lay.shape) * lay.dtype.itemsize
        if current and size + n > limit:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        buckets.append(current)
    return buckets


def _bucket(program, key, bucket):
    placement, mesh_dims, dtype = key
    ins = [program.instrs[i].ins[0] for i in bucket]
    outs = [program.instrs[i].outs[0] for i in bucket]
    shapes = [program.regs[r].local_shape for r in outs]
    group = _group(placement.axes_ranks(mesh_dims, placement.mesh_coord(get_rank())))
    handle = Reg(len(program.regs), "handle", None, np.empty(0, dtype))
    program.regs.append(handle)
    text = f"{len(bucket)} gradients, {sum(math.prod(s) for s in shapes) * np.dtype(dtype).itemsize} bytes, ranks {group.ranks}"
    start = Instr("start", "all_reduce", _Start(device(placement.type), group, shapes, dtype), ins, [handle.index],
                  plain=True, detail=text)
    wait = Instr("wait", "all_reduce", _Wait(shapes), [handle.index], outs)
    return start, wait


class _Start:
    """Pack the gradients into the bucket's flat buffer and start its all_reduce. The buffer is
    kept from replay to replay (the collectives know its memory: no fresh pages, no new
    mapping on the peers); a new one is made while a view from the last replay is still held
    (a .grad somebody kept)."""

    def __init__(self, dev, group, shapes, dtype):
        self.dev, self.group, self.dtype = dev, group, dtype
        self.total = sum(math.prod(s) for s in shapes)
        self.flat, self._baseline = None, 0

    def _buffer(self):
        flat = self.flat
        if flat is None or sys.getrefcount(flat) > self._baseline:
            flat = self.flat = self.dev.empty((self.total,), self.dtype)
            self._baseline = sys.getrefcount(flat)
        return flat

    def __call__(self, *pieces):
        flat = self._buffer()
        self.dev.xp.concatenate([p.reshape(-1) for p in pieces], out=flat)
        return self.dev.collectives.all_reduce_async(flat, group=self.group), flat


class _Wait:
    """Wait for the bucket; each gradient is its view of the reduced buffer."""

    def __init__(self, shapes):
        self.cuts, start = [], 0
        for s in shapes:
            n = math.prod(s)
            self.cuts.append((start, start + n, s))
            start += n

    def __call__(self, handle):
        work, flat = handle
        work.wait()
        return [flat[a:b].reshape(s) for a, b, s in self.cuts]
