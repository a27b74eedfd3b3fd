"""Export and load: a program with its state written as data, and a loaded program run as a module."""
import numpy as np

from ..env import get_rank, get_world_size
from ..generator import Generator
from ..random import Stream, get_rng_state
from ..tensor import Tensor
from . import passes, serialize
from .graph import _unflatten
from .program import Program
from .rebuild import ProgramState, rebuild
from .replay import compile_program

_REFUSED = {"host": "a step computed outside the dispatcher (a copy)", "start": "a planned bucket (save the "
            "captured program: program.unplanned())", "wait": "a planned bucket"}


def export(program, state_tensors=None, path=None, tree=None):
    """Write `program` (its captured form: program.unplanned()) and the pieces of the state it
    reads to directory `path`, this rank's part (every rank of the job calls it). `state_tensors`
    ({name: tensor}) overrides the tensors its read instructions name (Paddle's scope)."""
    if path is None:
        raise TypeError("graph.export(program, state_tensors, path): path is required")
    tree = getattr(program, "tree", None) if tree is None else tree
    data_form = program.unplanned() if isinstance(program, Program) else program
    state_tensors = dict(state_tensors or {})
    pieces, tensors, scalars = {}, {}, {}
    for i, ins in enumerate(data_form.instrs):
        _refuse(ins, i)
        if ins.kind in ("read", "grad", "set") and ins.name not in tensors:
            t = state_tensors.get(ins.name)
            if t is None:
                t = ins.fn if ins.kind == "read" else getattr(ins.fn, "leaf", None) or getattr(ins.fn, "t", None)
            lay = data_form.regs[(ins.outs or ins.ins)[0]].layout
            pieces[ins.name] = t._local
            tensors[ins.name] = {"layout": serialize.layout_data(lay),
                                 "requires_grad": bool(getattr(t, "requires_grad", False))}
        elif ins.kind == "const":
            pieces[f"const/{ins.outs[0]}"] = ins.fn
        elif ins.kind == "scalar":
            scalars[ins.name] = serialize.encode(_number(ins.fn()), f"scalar {ins.name}")
    manifest = serialize.program_data(data_form)
    seed, counter = get_rng_state()  # the stream the draws continue (a loaded program's own)
    manifest.update(tree=serialize.tree_data(tree), tensors=tensors, scalars=scalars,
                    stream=[str(seed), counter])
    serialize.write(path, manifest, pieces, get_rank(), get_world_size())


def _refuse(ins, i):
    """Raise (before anything is written) for an instruction that is Python code rather than data."""
    why = _REFUSED.get(ins.kind)
    if why is None and ins.kind == "step" and not ins.detail:
        why = f"Python code ({ins.name}: an optimizer's own step(), a scheduler's step or a module's zero_grad)"
    if why is None and ins.kind == "random" and not ins.detail:
        why = "a draw from a generator of its own, or of a factory without a spec (randperm)"
    if why is not None:
        raise ValueError(f"graph.save: instruction {i} ({ins.kind} {ins.name}) is {why}, which a saved program "
                         f"cannot carry as data")


def _number(value):
    if isinstance(value, Tensor):
        value = value.numpy()
    return np.asarray(value).item()


def save(program, path, state=None):
    """graph.save(program, path): export with the state its reads name (the same format)."""
    export(program, state, path)


def load(path):
    """The program saved at `path` (this rank's part), rebuilt from data, as a LoadedProgram."""
    rank = get_rank()
    manifest, pieces = serialize.read(path)
    program = serialize.program_of(manifest, rank)
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
        export(self.data, None, path)

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
