"""Export and load: a program with its state written as data, and a loaded program run as a module."""
from .. import dtype as dtype_lib
from ..env import get_rank, get_world_size
from ..generator import Generator
from ..random import Stream
from ..tensor import Tensor
from . import passes, serialize
from .graph import _unflatten
from .program import Instr, Program, Reg
from .rebuild import ProgramState, rebuild
from .replay import compile_program
from .serialize import export


def save(program, path, state=None):
    """graph.save(program, path): program.save(path) (the same format as export)."""
    export(program, state, path)


def program_of(data, rank):
    """The Program a manifest describes (fns not yet rebuilt: rebuild.rebuild)."""
    regs = []
    for i, d in enumerate(data["regs"]):
        np_dtype = dtype_lib.to_dtype(d["dtype"]).np
        reg = Reg(i, d["kind"], serialize.layout_of(d["layout"]), None, d["local_shape"], np_dtype)
        for k in serialize.REG_FACTS[1:]:
            setattr(reg, k, d[k])
        regs.append(reg)
    instrs = [Instr(d["kind"], d["name"], None, d["ins"], d["outs"], d["plain"], serialize.decode(d["detail"]),
                    hints=d.get("hints")) for d in data["instrs"]]
    program = Program(regs, instrs, list(data["inputs"]), list(data["outputs"]), data["label"], rank, data["roles"])
    program.tree = serialize.tree_of(data["tree"])
    return program


def load(path):
    """The program saved at `path` (this rank's part), rebuilt from data, as a LoadedProgram."""
    rank = get_rank()
    manifest, pieces = serialize.read(path)
    program = program_of(manifest, rank)
    tensors = {name: serialize.state_tensor(pieces[name], serialize.layout_of(m["layout"]), m["requires_grad"])
               for name, m in manifest["tensors"].items()}
    consts = {int(k.split("/", 1)[1]): v for k, v in pieces.items() if k.startswith("const/")}
    scalars = {k: serialize.decode(v) for k, v in manifest["scalars"].items()}
    seed, counter = manifest["stream"]
    stream = Stream(int(seed))
    stream.counter = int(counter)
    state = ProgramState(tensors, scalars, consts, Generator(_stream=stream))
    rebuild(program, state, rank)
    return LoadedProgram(program, state)


def runnable(program):
    """A planned, compiled copy of `program` (the planning passes, then replay's function)."""
    out = passes.planned(program)
    compile_program(out)
    return out


class LoadedProgram:
    """A program with its own state, callable as a module: loaded(*tensors) replays it; its
    parameters are the state tensors it reads (the saved ones after graph.load)."""

    def __init__(self, program, state):
        self.data, self.state = program, state
        self.planned = runnable(program)

    def __call__(self, *args):
        regs = self.data.regs
        if len(args) != len(self.data.inputs):
            raise TypeError(f"{self.data.label}: takes {len(self.data.inputs)} tensors, got {len(args)}")
        for j, (t, r) in enumerate(zip(args, self.data.inputs)):
            _check_input(self.data.label, j, t, regs[r])
        pieces = self.planned.fn(*[t._local for t in args])
        tree = self.data.tree
        if tree is None:
            outs = tuple(Tensor(p) if regs[r].layout is None else Tensor._wrap(p, regs[r].layout)
                         for p, r in zip(pieces, self.data.outputs))
            return outs[0] if len(outs) == 1 else outs
        return _unflatten(tree, pieces)

    forward = __call__

    def named_parameters(self):
        return [(n, t) for n, t in self.state.tensors.items() if t.requires_grad]

    def parameters(self):
        return [t for _, t in self.named_parameters()]

    @property
    def generator(self):
        """The generator the program's random draws (dropout) take: the stream saved with it."""
        return self.state.generator

    def state_dict(self):
        return dict(self.state.tensors)

    def program(self, rank=None):
        return self.planned.text(rank)

    def save(self, path):
        """Write it again (its state as it stands now, its draws' stream where it stands)."""
        export(self.data, None, path, generator=self.state.generator)

    def __repr__(self):
        return self.program()


def _check_input(label, j, t, reg):
    if not isinstance(t, Tensor):
        raise TypeError(f"{label}: input {j} must be a tensor, got {type(t).__name__}")
    if reg.layout is None:
        if t._placement is not None or tuple(t.shape) != reg.local_shape or t._dtype.np != reg.dtype:
            raise ValueError(f"{label}: input {j} must be a local tensor {reg.local_shape} {reg.dtype.name}, got "
                             f"{tuple(t.shape)} {t.dtype.name}{'' if t.is_local else ' global'}")
    elif (t._layout or (t.layout() if t._placement is not None else None)) is not reg.layout:
        lay = reg.layout
        raise ValueError(f"{label}: input {j} must be {tuple(lay.shape)} {lay.dtype.name} on {lay.placement} sbp "
                         f"{lay.sbp}, got {tuple(t.shape)} {t.dtype.name}"
                         + ("" if t.is_local else f" on {t.placement} sbp {t.sbp}"))
