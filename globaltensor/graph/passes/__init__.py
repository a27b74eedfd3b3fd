"""Planning passes over a captured program, in the order they run (each: run(program) -> report)."""
from . import bucket_grads, dead_ops, fuse_boxing, liveness

PASSES = [("fuse_boxing", fuse_boxing.run), ("bucket_grads", bucket_grads.run), ("dead_ops", dead_ops.run),
          ("liveness", liveness.run)]


def plan(program):
    """Run every pass; what each did goes to program.report."""
    for name, run in PASSES:
        program.report[name] = run(program)
    return program
