"""Dead ops: drop steps whose results nothing uses (effects -- draws, updates, buckets -- stay)."""
from ..program import EFFECTS


def run(program):
    live = set(program.outputs)
    kept, removed = [], 0
    for ins in reversed(program.instrs):
        if ins.kind in EFFECTS or any(r in live for r in ins.outs):
            kept.append(ins)
            live.update(ins.ins)
        else:
            removed += 1
    program.instrs = kept[::-1]
    return {"removed": removed}
