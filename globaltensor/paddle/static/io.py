"""Static programs on disk in graph's saved format (JSON manifest + safetensors): parameters and inference models.

path_prefix.pdmodel is a directory (graph.save's layout: program.json, rank0.json, rank0.safetensors)
whose manifest adds {"paddle": {"kind", "feeds", "fetches", "names"}}; model_path.pdparams likewise
holds a program of the parameters' reads. Nothing is pickled; a file that is not ours raises.
"""
import os

import numpy as np

from ...dtype import to_dtype
from ...graph import serialize
from ...graph.program import Instr, Program as GraphProgram, Reg
from ...graph.rebuild import ProgramState, rebuild
from ...graph.saved import program_of
from .executor import prune
from .recorder import Variable, meta_array

KINDS = ("inference_model", "params")


class InputSpec:
    """paddle.static.InputSpec(shape, dtype, name): a placeholder's description (None / -1: any size)."""

    def __init__(self, shape=None, dtype="float32", name=None, stop_gradient=False):
        if isinstance(shape, int):
            shape = [shape]
        self.shape = tuple(-1 if d is None else int(d) for d in (shape or []))  # Paddle keeps a tuple
        self.dtype, self.name, self.stop_gradient = to_dtype(dtype), name, stop_gradient

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(list(tensor.shape), tensor.dtype, name or getattr(tensor, "name", None))

    @classmethod
    def from_numpy(cls, ndarray, name=None):
        return cls(list(ndarray.shape), str(ndarray.dtype), name)

    def batch(self, batch_size):
        """A new leading dim (Paddle's InputSpec.batch)."""
        self.shape = (-1 if batch_size is None else int(batch_size),) + self.shape
        return self

    def unbatch(self):
        if not self.shape:
            raise ValueError("Not support to unbatch a InputSpec when len(shape) == 0.")
        self.shape = self.shape[1:]
        return self

    def __eq__(self, other):
        return isinstance(other, InputSpec) and (self.shape, self.dtype, self.name) == \
            (other.shape, other.dtype, other.name)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self):
        return (f"InputSpec(shape={self.shape}, dtype={self.dtype}, name={self.name}, "
                f"stop_gradient={self.stop_gradient})")


def _named_params(program):
    return {getattr(p, "name", f"param_{i}"): p for i, p in enumerate(program.parameters)}


def _export(graph, state, path, paddle_data):
    """graph's export, as a program local to one process (rank 0 of 1: a static program is the same on every rank)."""
    serialize.export(graph, state, path, extra={"paddle": paddle_data}, rank=0, world_size=1)


def _read(path, kind, what):
    """(manifest, pieces) of a directory we wrote as `kind`; a clear error for anything else."""
    if os.path.isfile(path):
        raise ValueError(f"{what}: {path} is a file, not a globaltensor saved program (a directory with "
                         f"program.json); Paddle's own protobuf .pdmodel / .pdiparams files cannot be read here")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{what}: {path} does not exist")
    manifest, pieces = serialize.read(path, rank=0, world_size=1)
    found = (manifest.get("paddle") or {}).get("kind")
    if found != kind:
        raise ValueError(f"{what}: {path} is a saved program but not a Paddle {kind} (its kind: {found!r})")
    return manifest, pieces


def save(program, model_path, protocol=4, **configs):
    """The program's parameters to model_path + '.pdparams' (graph's format: a program of their reads)."""
    params = _named_params(program)
    regs = [Reg(j, "state", None, meta_array(p._local.shape, p._local.dtype)) for j, p in enumerate(params.values())]
    instrs = [Instr("read", name, p, [], [j]) for j, (name, p) in enumerate(params.items())]
    graph = GraphProgram(regs, instrs, [], list(range(len(regs))), "paddle_params")
    _export(graph, params, model_path + ".pdparams", {"kind": "params", "names": list(params)})


def load_program_state(model_path, var_list=None):
    """{parameter name: array} saved by save(program, model_path)."""
    path = model_path if model_path.endswith(".pdparams") else model_path + ".pdparams"
    manifest, pieces = _read(path, "params", "load_program_state")
    return {name: np.array(pieces[name]) for name in manifest["paddle"]["names"]}


def set_program_state(program, state):
    for name, p in _named_params(program).items():
        if name in state:
            value = np.asarray(state[name])
            if value.shape != tuple(p.shape):
                raise ValueError(f"set_program_state: {name} has shape {tuple(p.shape)}, the state {value.shape}")
            p._local = value.astype(p._local.dtype, copy=True)


def load(program, model_path, executor=None, var_list=None):
    """The parameters saved by save(program, model_path) back into the program's parameters."""
    set_program_state(program, load_program_state(model_path))


def save_inference_model(path_prefix, feed_vars, fetch_vars, executor=None, program=None, **kwargs):
    """The forward of fetch_vars from feed_vars (the program cloned for test, pruned to them) as
    graph's saved program in directory path_prefix.pdmodel, with the parameters' pieces in it:
    load_inference_model runs it without the Python model, at any size of a dynamic dim."""
    from .program import default_main_program
    feed_vars = list(feed_vars) if isinstance(feed_vars, (list, tuple)) else [feed_vars]
    fetch_vars = list(fetch_vars) if isinstance(fetch_vars, (list, tuple)) else [fetch_vars]
    source = program if program is not None else (fetch_vars[0].program or default_main_program())
    program = source.clone(for_test=True)
    outputs = [program.by_array[id(v._local)] for v in fetch_vars]
    feeds = [program.feeds[v.name] for v in feed_vars]
    instrs, _ = prune(program, outputs)
    for ins in instrs:
        if ins.kind == "op" and ins.name == "sparse_embedding":
            raise ValueError(f"save_inference_model: the forward looks up the parameter-server table "
                             f"{ins.detail['table']!r} (sparse_embedding), whose rows an inference model cannot "
                             f"hold; run the program attached to the servers (is_test lookups), or save a dense "
                             f"embedding")
        if ins.kind not in ("op", "read", "const"):
            raise ValueError(f"save_inference_model: the forward holds a {ins.kind} step ({ins.name}), which an "
                             f"inference program cannot keep (a random op outside for_test)")
    graph = GraphProgram(program.regs, instrs, feeds, outputs, "paddle_inference")
    names = {r: program.names[r] for ins in instrs for r in ins.ins + ins.outs if r in program.names}
    _export(graph, _named_params(program), path_prefix + ".pdmodel",
            {"kind": "inference_model", "feeds": [v.name for v in feed_vars],
             "fetches": [v.name for v in fetch_vars], "names": {str(r): n for r, n in names.items()},
             "unexplained": list(program.unexplained)})


def load_inference_model(path_prefix, executor=None, **kwargs):
    """[program, feed names, fetch Variables] of a saved inference model (no Python model needed)."""
    from .program import Program
    manifest, pieces = _read(path_prefix + ".pdmodel", "inference_model", "load_inference_model")
    graph = program_of(manifest, 0)
    tensors = {name: serialize.state_tensor(pieces[name], None, m["requires_grad"])
               for name, m in manifest["tensors"].items()}
    consts = {int(k.split("/", 1)[1]): v for k, v in pieces.items() if k.startswith("const/")}
    rebuild(graph, ProgramState(tensors, {}, consts), 0)
    info = manifest["paddle"]
    names = {int(r): n for r, n in info["names"].items()}
    program = Program()
    for reg in graph.regs:
        program._reg(reg.kind, meta_array(reg.local_shape, reg.dtype), name=names.get(reg.index))
    program.instrs, program.unexplained = list(graph.instrs), list(info.get("unexplained", []))
    for name, r in zip(info["feeds"], graph.inputs):
        program.feeds[name] = r
        program.vars[name] = _var(program, r, name)
    fetches = [_var(program, r, name) for name, r in zip(info["fetches"], graph.outputs)]
    for v in fetches:
        program.vars[v.name] = v
    return [program, list(info["feeds"]), fetches]


def _var(program, r, name):
    return Variable(program.regs[r].array, name, program)


__all__ = ["InputSpec", "load", "load_inference_model", "load_program_state", "save", "save_inference_model",
           "set_program_state"]
