"""Boxing fusion: a conversion whose input only feeds another becomes one conversion, planned
whole (P->B then a split is a reduce_scatter; conversions that cancel are dropped), and one
value converted the same way twice (two ops needing it whole) is converted once."""
import functools

from ...boxing import plan
from ..capture import _run_box


def _fusable(program, i, producer, uses):
    """The box instruction feeding box i alone, or None."""
    src = program.instrs[i].ins[0]
    j = producer.get(src)
    if j is None or program.instrs[j].kind != "box" or program.regs[src].escapes or len(uses.get(src, ())) != 1:
        return None
    return j


def run(program):
    fused = cancelled = 0
    changed = True
    while changed:
        changed = False
        instrs = program.instrs
        producer = {r: i for i, ins in enumerate(instrs) for r in ins.outs}
        uses = program.uses()
        for i, ins in enumerate(instrs):
            if ins.kind != "box":
                continue
            j = _fusable(program, i, producer, uses)
            if j is None:
                continue
            first, p1, p2 = instrs[j], instrs[j].detail, ins.detail
            whole = plan(p1.src_placement, p1.src_sbp, p2.dst_placement, p2.dst_sbp, p1.global_shape, p1.itemsize)
            if (whole.bytes, len(whole.steps)) >= (p1.bytes + p2.bytes, len(p1.steps) + len(p2.steps)):
                continue
            if not whole.steps and p1.src_placement == p2.dst_placement:
                _rename(program, ins.outs[0], first.ins[0])
                program.instrs = [x for k, x in enumerate(instrs) if k not in (i, j)]
                cancelled += 1
            else:
                dt = program.regs[first.ins[0]].layout.dtype
                ins.detail, ins.fn, ins.ins = whole, functools.partial(_run_box, whole, dt), [first.ins[0]]
                program.instrs = [x for k, x in enumerate(instrs) if k != j]
                fused += 1
            changed = True
            break
    return {"fused": fused, "cancelled": cancelled, "shared": _share(program)}


def _share(program):
    """The second conversion of a register by the same plan reads the first one's result."""
    first, kept, shared = {}, [], 0
    for ins in program.instrs:
        if ins.kind == "box":
            key = (ins.ins[0], id(ins.detail))
            done = first.get(key)
            if done is not None:
                _rename(program, ins.outs[0], done)
                shared += 1
                continue
            first.setdefault(key, ins.outs[0])
        kept.append(ins)
    program.instrs = kept
    return shared


def _rename(program, old, new):
    """Every use of register `old` reads `new` instead."""
    for ins in program.instrs:
        ins.ins = [new if r == old else r for r in ins.ins]
    program.outputs = [new if r == old else r for r in program.outputs]
    program.regs[new].escapes |= program.regs[old].escapes
