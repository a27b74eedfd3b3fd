"""Program -> program passes that cut: prune to fetch targets, and clone for test (no backward, no update)."""
from ..program import EFFECTS

TRAINING = frozenset({"grad", "reduce", "update", "scalar", "step", "start", "wait"})  # clone(for_test) drops


def fetch_registers(program, fetch_targets):
    """Registers of the fetch targets: register indices, or the names of state the program reads."""
    named = {ins.name: ins.outs[0] for ins in program.instrs if ins.kind == "read"}
    found = []
    for target in fetch_targets:
        if isinstance(target, int) and 0 <= target < len(program.regs):
            found.append(target)
        elif isinstance(target, str) and target in named:
            found.append(named[target])
        else:
            raise KeyError(f"prune: fetch target {target!r} is neither a register of {program.label} "
                           f"(0..{len(program.regs) - 1}) nor state it reads ({sorted(named)[:6]}...)")
    return found


def prune(program, fetch_targets, keep_effects=False):
    """A new program computing only what `fetch_targets` need (its outputs, in order); effects
    (updates, gradients, sets, draws, sends) stay only with keep_effects=True."""
    src = program.unplanned().copy()
    outputs = fetch_registers(src, fetch_targets)
    src.instrs = needed_instrs(src.instrs, outputs, EFFECTS if keep_effects else frozenset())
    src.outputs, src.tree = outputs, None
    src.label = f"{program.label} pruned"
    return src


def clone(program, for_test=False):
    """Paddle's Program.clone: a copy; for_test=True drops backward and the optimizer (gradient,
    reduce, update, scalar and step instructions, then what only they used)."""
    src = program.unplanned().copy()
    src.tree = getattr(program, "tree", None)
    if not for_test:
        return src
    kept = [ins for ins in src.instrs if ins.kind not in TRAINING]
    src.instrs = needed_instrs(kept, src.outputs, EFFECTS - TRAINING)
    made = {r for ins in src.instrs for r in ins.outs} | set(src.inputs)
    lost = [r for ins in src.instrs for r in ins.ins if r not in made]
    if lost:
        raise ValueError(f"clone(for_test=True): {program.label} computes forward values from the optimizer's "
                         f"(registers {sorted(set(lost))[:6]}); prune it to its fetch targets instead")
    src.label = f"{program.label} for test"
    return src


def inference_instrs(instrs, inputs, cut=None, switches=()):
    """Instructions for test (Paddle's clone(for_test=True) of a recorded program): those before
    `cut` (where the backward starts), each region (start, end, at_inference) of `switches`
    replaced by its inference form (dropout: its input; batch_norm: the moving statistics), and
    the sets that only a replaced region fed (a moving statistic's update) dropped."""
    kept = list(instrs if cut is None else instrs[:cut])
    for start, end, at_inference in sorted(switches, key=lambda s: s[0], reverse=True):
        if end <= len(kept):
            kept[start:end] = at_inference
    made = set(inputs).union(*(ins.outs for ins in kept))
    return [ins for ins in kept if ins.kind != "set" or made.issuperset(ins.ins)]


def needed_instrs(instrs, outputs, effects):
    """The instructions the outputs (and the kept effects) depend on, in order."""
    live = set(outputs)
    kept = []
    for ins in reversed(instrs):
        if ins.kind in effects or any(r in live for r in ins.outs):
            kept.append(ins)
            live.update(ins.ins)
    return kept[::-1]
