"""Gather prefetch (ZeRO-3 in graph mode): each all_gather of a sharded parameter split into an async
start and a wait, the next unit's start issued before this unit computes, each use span gathered anew."""
import math

from ... import layout
from ...backends.devices import device
from ...boxing import _group, run as run_plan
from ...boxing.execution import _block_shapes, _contiguous, _unpack
from ...env import get_rank
from ..program import Instr, Reg

# a start never moves above these (they may write a parameter's shard, or talk to a peer)
BARRIERS = frozenset({"set", "update", "step", "host", "send", "recv"})


def _gather_of_state(program, ins, producer):
    """Whether box instruction ins is one all_gather (S(d) -> B on a 1-D cpu placement this rank is
    in) of a state read (a parameter's shard) whose result stays inside the step."""
    if ins.kind != "box" or len(ins.ins) != 1:
        return False
    src = producer.get(ins.ins[0])
    plan = ins.detail
    if src is None or program.instrs[src].kind != "read" or len(plan.steps) != 1:
        return False
    step = plan.steps[0]
    out = ins.outs[0]
    return (step.kind.name == "all_gather" and plan.src_placement == plan.dst_placement
            and plan.src_placement.ndim == 1 and plan.src_placement.type == "cpu"
            and plan.src_placement.mesh_coord(get_rank()) is not None
            and out not in program.outputs and not program.regs[out].escapes)


def _spans(positions, others):
    """A gathered value's uses cut into spans: a use after another parameter's gathered value was
    used (a later layer's forward, then backward) starts a new span, gathered again."""
    spans, last = [[positions[0]]], positions[0]
    for u in positions[1:]:
        if any(last < o < u for o in others):
            spans.append([])
        spans[-1].append(u)
        last = u
    return spans


def run(program):
    """Rewrite the program's parameter gathers (in place); report how many, how many ahead, how many again."""
    instrs = program.instrs
    producer = {r: i for i, ins in enumerate(instrs) for r in ins.outs}
    uses = program.uses()
    found = [i for i, ins in enumerate(instrs) if _gather_of_state(program, ins, producer) and uses.get(ins.outs[0])]
    if not found:
        return {"gathers": 0, "ahead": 0, "regathered": 0}
    spans = _all_spans(program, found, uses)
    units = sorted({first for first, *_ in spans})  # a unit: the gathers one instruction needs first
    barriers = [k for k, ins in enumerate(instrs) if ins.kind in BARRIERS]
    before = {}  # (position, slot) -> instructions inserted before it: 0 own starts, 1 waits, 2 starts ahead
    renames = {}  # (use position, old register) -> new register
    ahead = 0
    for first, i, span, reg in spans:
        k = units.index(first)
        fence = max((b + 1 for b in barriers if b < first), default=0)
        at = max(units[k - 1] if k else first, fence)  # issued before the previous unit computes
        ahead += at < first
        start, wait = _split(program, instrs[i], instrs[producer[instrs[i].ins[0]]], reg, at < first)
        before.setdefault((at, 2 if at < first else 0), []).extend(start)
        before.setdefault((first, 1), []).append(wait)
        for u in span if reg is not None else ():
            renames[(u, instrs[i].outs[0])] = reg
    out = []
    for k, ins in enumerate(instrs):
        out += before.get((k, 0), []) + before.get((k, 1), []) + before.get((k, 2), [])
        if k not in found:
            ins.ins = [renames.get((k, r), r) for r in ins.ins]
            out.append(ins)
    program.instrs = out
    return {"gathers": len(spans), "ahead": ahead, "regathered": len(spans) - len(found)}


def _all_spans(program, found, uses):
    """(first use, box position, the uses, the register it defines: None for the box's own) of every
    use span of the gathered values of the boxes at positions `found`."""
    used_at = {i: sorted(set(uses[program.instrs[i].outs[0]])) for i in found}
    spans = []
    for i in found:
        others = sorted({u for j in found if j != i for u in used_at[j]})
        for n, span in enumerate(_spans(used_at[i], others)):
            spans.append((span[0], i, span, None if n == 0 else _new_reg(program, program.instrs[i].outs[0])))
    return spans


def _split(program, box, read, reg, early):
    """([a fresh read of the shard, the gather's start], its wait) for box (into reg, or the box's own)."""
    shard = _new_reg(program, read.outs[0])
    handle = len(program.regs)
    program.regs.append(Reg(handle, "handle", None, None, (0,), "float32"))
    fn = _Start(box.detail, program.regs[read.outs[0]].layout.dtype)
    note = f"{read.name}, one unit ahead" if early else read.name
    start = [Instr("read", read.name, read.fn, [], [shard]),
             Instr("start", "all_gather", fn, [shard], [handle], plain=True, detail=note)]
    return start, Instr("wait", "all_gather", _Wait(), [handle], [box.outs[0] if reg is None else reg], plain=True)


def _new_reg(program, like):
    """A new register with the layout and piece of register `like`."""
    old = program.regs[like]
    reg = Reg(len(program.regs), old.kind, old.layout, None, old.local_shape, old.dtype)
    reg.owns, reg.numpy, reg.contiguous, reg.device = old.owns, old.numpy, old.contiguous, old.device
    program.regs.append(reg)
    return reg.index


class _Start:
    """Start a parameter shard's all_gather on its group's worker thread (collectives.all_gather_async);
    where the group has none (it spans hosts), gather now."""

    def __init__(self, plan, dt):
        self.plan, self.dt = plan, dt
        step = plan.steps[0]
        coord = step.placement.mesh_coord(get_rank())
        self.dim, self.dev = step.src[0].dim, device(step.placement.type)
        self.group = _group(step.placement.axis_ranks(0, coord))
        self.k = step.placement.hierarchy[0]

    def __call__(self, piece):
        shapes = _block_shapes(piece.shape, self.dim, layout.split_sizes(self.plan.global_shape[self.dim], self.k))
        started = self.dev.collectives.all_gather_async(_contiguous(piece).reshape(-1),
                                                        [math.prod(b) for b in shapes], group=self.group)
        if started is None:
            return None, run_plan(self.plan, piece, self.dt), None
        return started[0], started[1], (shapes, self)


class _Wait:
    """Wait for a started gather; its flat result laid out as the parameter's whole value."""

    def __call__(self, handle):
        work, flat, how = handle
        if work is None:
            return flat
        work.wait()
        shapes, start = how
        return _unpack(flat, shapes, start.dim, start.dt, start.dev)
