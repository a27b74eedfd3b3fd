"""Passes: the planning passes, in the order they run (each: run(program) -> report, in place), and
the program -> program passes that compose (prune, clone, split_by_role, insert_send_recv)."""
from . import bucket_grads, dead_ops, fuse_boxing, liveness, prefetch_gathers
from .prune import clone, inference_instrs, needed_instrs, prune
from .roles import insert_send_recv, role_of, split_by_role

PASSES = [("fuse_boxing", fuse_boxing.run), ("bucket_grads", bucket_grads.run),
          ("prefetch_gathers", prefetch_gathers.run), ("dead_ops", dead_ops.run), ("liveness", liveness.run)]


def plan(program):
    """Run every pass; what each did goes to program.report."""
    for name, run in PASSES:
        program.report[name] = run(program)
    return program


def planned(program):
    """A copy of `program` with the planning passes run (program -> program; the input stays as it is)."""
    out = program.copy()
    out.captured = program.unplanned()
    out.tree = getattr(program, "tree", None)
    return plan(out)


__all__ = ["PASSES", "clone", "inference_instrs", "insert_send_recv", "needed_instrs", "plan", "planned", "prune",
           "role_of", "split_by_role"]
