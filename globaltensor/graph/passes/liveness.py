"""Liveness: each register is freed after its last use, and an element-wise numpy op writes into
the buffer of a register that died (out=) instead of allocating; reports the peak memory."""
import math

import numpy as np


def _reusable(program):
    """Registers whose buffer the program owns alone: a value made by the step, C-contiguous, not
    a view, viewed by no other register, never returned or kept by a tensor (Reg.root, Reg.owns:
    facts capture took from the arrays, kept in a saved program)."""
    sharing = {}
    for reg in program.regs:
        sharing[reg.root] = sharing.get(reg.root, 0) + 1
    return {reg.index for reg in program.regs
            if reg.kind == "value" and not reg.escapes and reg.owns and reg.contiguous and math.prod(reg.local_shape)
            and sharing[reg.root] == 1}


def _elementwise(ins):
    fn = ins.fn
    return ins.kind == "op" and ins.plain and isinstance(fn, np.ufunc) and fn.nout == 1


def run(program):
    instrs, regs = program.instrs, program.regs
    keep = set(program.outputs)
    last = {}
    for i, ins in enumerate(instrs):
        ins.drops, ins.reuse = [], None
        for r in ins.ins:
            last[r] = i
    for i, ins in enumerate(instrs):
        for r in ins.outs:
            last.setdefault(r, i)
    dropped_at = {}
    for r, i in last.items():
        if r not in keep:
            instrs[i].drops.append(r)
            dropped_at[r] = i
    for r in program.inputs:
        if r not in last and r not in keep:
            dropped_at[r] = -1
    reusable = _reusable(program)
    free, reused = {}, 0  # (shape, dtype) -> registers whose buffer is free
    for i, ins in enumerate(instrs):
        if _elementwise(ins) and ins.outs[0] in reusable:
            out = regs[ins.outs[0]]
            key = (out.local_shape, out.dtype)
            here = [r for r in ins.ins if r in reusable and dropped_at.get(r) == i
                    and (regs[r].local_shape, regs[r].dtype) == key]
            pool = free.get(key, [])
            pick = here[0] if here else (pool.pop() if pool else None)
            if pick is not None:
                ins.reuse = pick
                if pick not in ins.drops:  # freed earlier: now freed after this op, which writes into it
                    instrs[dropped_at[pick]].drops.remove(pick)
                    ins.drops.append(pick)
                    dropped_at[pick] = i
                reused += 1
                continue_free = [r for r in ins.drops if r != pick]
            else:
                continue_free = ins.drops
        else:
            continue_free = ins.drops
        for r in continue_free:
            if r in reusable:
                free.setdefault((regs[r].local_shape, regs[r].dtype), []).append(r)
    peak, peak_plain = _peak(program, True), _peak(program, False)
    kept_all = sum(r.nbytes for r in regs if r.kind in ("value", "input") and _owned(r))
    return {"reused": reused, "peak_bytes": peak, "peak_bytes_without_reuse": peak_plain,
            "bytes_without_frees": kept_all}


def _peak(program, with_reuse):
    """The largest sum of owned register bytes alive at once on this rank (views count nothing)."""
    regs = program.regs
    owned = {r.index for r in regs if r.kind in ("value", "input") and _owned(r)}
    live = sum(regs[r].nbytes for r in program.inputs if r in owned)
    peak = live
    handed = {ins.reuse for ins in program.instrs if ins.reuse is not None} if with_reuse else set()
    for ins in program.instrs:
        for r in ins.outs:
            if r in owned and not (with_reuse and ins.reuse is not None):
                live += regs[r].nbytes
        peak = max(peak, live)
        for r in ins.drops:
            if r in owned and r not in handed:
                live -= regs[r].nbytes
    return peak


def _owned(reg):
    """Whether reg's bytes are its own (not a view of another register's or a state's buffer)."""
    return reg.owns
