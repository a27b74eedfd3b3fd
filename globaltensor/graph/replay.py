"""Replay: a program as one straight-line Python function over its prepared calls (no dispatch)."""


def compile_program(program):
    """program.fn(*input pieces) -> output pieces: one line per instruction, each a call of a
    prepared function bound by name (kernel, boxing plan, setter), registers as local variables,
    a register deleted after its last use (liveness pass), an op that may write into a dead
    register's buffer given it as out=."""
    names, lines = {}, []
    args = ", ".join(f"r{r}" for r in program.inputs)
    lines.append(f"def replay({args}):")
    for i, ins in enumerate(program.instrs):
        f = f"f{i}"
        names[f] = ins.fn
        call_args = ", ".join(f"r{r}" for r in ins.ins)
        if ins.kind == "read":
            line = f"r{ins.outs[0]} = {f}._local"
        elif ins.kind == "const":
            line = f"r{ins.outs[0]} = {f}"
        elif ins.kind in ("grad", "set", "step", "update", "send"):
            line = f"{f}({call_args})"
        else:
            if ins.reuse is not None:
                call_args += f", out=r{ins.reuse}"
            outs = ", ".join(f"r{r}" for r in ins.outs)
            if ins.plain:
                line = f"{outs} = {f}({call_args})"
            else:
                line = f"{outs}{',' if len(ins.outs) == 1 else ''} = {f}({call_args})"
        lines.append("    " + line)
        if ins.drops:
            lines.append("    del " + ", ".join(f"r{r}" for r in ins.drops))
    outs = ", ".join(f"r{r}" for r in program.outputs)
    lines.append(f"    return ({outs}{',' if len(program.outputs) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    namespace = dict(names)
    exec(compile(source, f"<graph {program.label}>", "exec"), namespace)  # noqa: S102 - our own generated code
    program.source = source
    program.fn = namespace["replay"]
    return program.fn
