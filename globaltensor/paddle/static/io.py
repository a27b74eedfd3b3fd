"""Static programs on disk: parameters (save/load) and inference programs as data (ops by name, attrs)."""
import os
import pickle

import numpy as np

from ...graph.program import Instr
from ...registry import REGISTRY
from .executor import prune
from .recorder import Variable, _Kernel, meta_array

FORMAT = "globaltensor.paddle.static.inference/1"


class InputSpec:
    """paddle.static.InputSpec(shape, dtype, name): a placeholder's description (None / -1: any size)."""

    def __init__(self, shape=None, dtype="float32", name=None, stop_gradient=False):
        self.shape = [-1 if d is None else int(d) for d in (shape or [])]
        self.dtype, self.name, self.stop_gradient = dtype, name, stop_gradient

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(list(tensor.shape), tensor.dtype.name, name or getattr(tensor, "name", None))

    def __repr__(self):
        return f"InputSpec(shape={tuple(self.shape)}, dtype={self.dtype}, name={self.name})"


def _param_values(program):
    return {getattr(p, "name", f"param_{i}"): np.array(p._local) for i, p in enumerate(program.parameters)}


def save(program, model_path, protocol=4, **configs):
    """The program's parameters to model_path + '.pdparams' (a pickle of name -> array, as Paddle's)."""
    os.makedirs(os.path.dirname(os.path.abspath(model_path)), exist_ok=True)
    with open(model_path + ".pdparams", "wb") as f:
        pickle.dump(_param_values(program), f, protocol=protocol)


def load_program_state(model_path, var_list=None):
    path = model_path if model_path.endswith(".pdparams") else model_path + ".pdparams"
    with open(path, "rb") as f:
        return pickle.load(f)


def set_program_state(program, state):
    for i, p in enumerate(program.parameters):
        name = getattr(p, "name", f"param_{i}")
        if name in state:
            value = np.asarray(state[name])
            if value.shape != tuple(p.shape):
                raise ValueError(f"set_program_state: {name} has shape {tuple(p.shape)}, the state {value.shape}")
            p._local = value.astype(p._local.dtype, copy=True)


def load(program, model_path, executor=None, var_list=None):
    """The parameters saved by save(program, model_path) back into the program's parameters."""
    set_program_state(program, load_program_state(model_path))


def save_inference_model(path_prefix, feed_vars, fetch_vars, executor=None, program=None, **kwargs):
    """The forward of fetch_vars from feed_vars as data (path_prefix.pdmodel: the ops by registered
    name with their attrs, registers' shapes and dtypes, constants; versioned) and the parameters
    (path_prefix.pdiparams, an npz): load_inference_model runs it without the Python model."""
    from .program import default_main_program
    feed_vars = list(feed_vars) if isinstance(feed_vars, (list, tuple)) else [feed_vars]
    fetch_vars = list(fetch_vars) if isinstance(fetch_vars, (list, tuple)) else [fetch_vars]
    program = (program if program is not None else fetch_vars[0].program).clone(for_test=True)
    outputs = [program.by_array[id(v._local)] for v in fetch_vars]
    instrs, _ = prune(program, outputs)
    params = {id(p): getattr(p, "name", f"param_{i}") for i, p in enumerate(program.parameters)}
    steps = []
    for ins in instrs:
        if ins.kind == "op":
            steps.append(("op", ins.name, ins.ins, ins.outs, ins.detail))
        elif ins.kind == "read":
            steps.append(("read", params[id(ins.fn)], [], ins.outs, None))
        elif ins.kind == "const":
            steps.append(("const", np.asarray(ins.fn), [], ins.outs, None))
        else:
            raise ValueError(f"save_inference_model: the forward holds a {ins.kind} step ({ins.name}), which an "
                             f"inference program cannot keep (a random op outside for_test)")
    regs = [(r.local_shape, r.dtype.str, program.names.get(r.index)) for r in program.regs]
    feeds = [(v.name, program.feeds[v.name]) for v in feed_vars]
    model = {"format": FORMAT, "regs": regs, "steps": steps, "feeds": feeds,
             "fetches": [(v.name, r) for v, r in zip(fetch_vars, outputs)]}
    os.makedirs(os.path.dirname(os.path.abspath(path_prefix)), exist_ok=True)
    with open(path_prefix + ".pdmodel", "wb") as f:
        pickle.dump(model, f, protocol=4)
    with open(path_prefix + ".pdiparams", "wb") as f:
        np.savez(f, **_param_values(program))


def load_inference_model(path_prefix, executor=None, **kwargs):
    """[program, feed names, fetch Variables] of a saved inference model (no Python model needed)."""
    from ...tensor import Tensor
    from .program import Program
    with open(path_prefix + ".pdmodel", "rb") as f:
        model = pickle.load(f)
    if model.get("format") != FORMAT:
        raise ValueError(f"load_inference_model: {path_prefix}.pdmodel is not a {FORMAT} file "
                         f"(format {model.get('format')!r})")
    with np.load(path_prefix + ".pdiparams") as z:
        values = {k: z[k] for k in z.files}
    program = Program()
    for shape, dt, name in model["regs"]:
        program._reg("value", meta_array(shape, dt), name=name)
    for kind, what, ins, outs, detail in model["steps"]:
        if kind == "op":
            program.instrs.append(Instr("op", what, _Kernel(REGISTRY[what].kernel, detail), ins, outs, detail=detail))
        elif kind == "read":
            t = Tensor(values[what])
            program.instrs.append(Instr("read", what, t, [], outs))
        else:
            program.instrs.append(Instr("const", "assign_value", what, [], outs))
    for name, r in model["feeds"]:
        program.feeds[name] = r
        program.vars[name] = _var(program, r, name)
    fetches = [_var(program, r, name) for name, r in model["fetches"]]
    for v in fetches:
        program.vars[v.name] = v
    return [program, [n for n, _ in model["feeds"]], fetches]


def _var(program, r, name):
    return Variable(program.regs[r].array, name, program)
