"""A program on disk: a versioned JSON manifest per rank plus its state pieces as safetensors (no code pickled).

Layout of a saved program (a directory):
  program.json          {"format": "globaltensor.program", "version": 1, "world_size": n, "label": ...}
  rank{r}.json          rank r's program: registers (kind, global layout, piece shape, dtype, buffer
                        facts), instructions (kind, name, detail, ins, outs), inputs, outputs, the
                        output tree, scalars (lr, step counts) and the state tensors' layouts
  rank{r}.safetensors   rank r's pieces: each state tensor under its name, each constant as const/<reg>
Each rank writes and reads its own pieces (a program may differ by rank: split_by_role); a load
needs the same world size. Values in `detail` are JSON with tags for what JSON lacks
({"tuple": [...]}, {"dtype": "float32"}, {"slice": [a, b, c]}, ...).
"""
import json
import os

import numpy as np

from .. import dtype as dtype_lib
from ..env import get_rank, get_world_size
from ..placement import placement as Placement
from ..sbp import _restore as sbp_of_text, _SBP
from ..random import get_rng_state
from ..tensor import Layout, Tensor

FORMAT, VERSION = "globaltensor.program", 1
_PLAIN_DTYPES = {"float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool"}


# --- values -------------------------------------------------------------------------------------
def encode(value, where="value"):
    """A static attribute (or any detail) as JSON data; raises TypeError naming what cannot be saved."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else {"float": repr(float(value))}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, where) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, where), encode(v, where)] for k, v in value.items()]}
    if isinstance(value, slice):
        return {"slice": [encode(value.start), encode(value.stop), encode(value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, dtype_lib.DType):
        return {"dtype": value.name}
    if isinstance(value, np.dtype):
        return {"npdtype": value.str if value.name not in dtype_lib._BY_NAME else value.name}
    if isinstance(value, _SBP):
        return {"sbp": str(value)}
    if isinstance(value, Placement):
        return {"placement": placement_data(value)}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, np.ndarray) and value.size <= 4096:
        return {"array": encode(value.tolist(), where), "dtype": value.dtype.name, "shape": list(value.shape)}
    raise TypeError(f"graph.save: {where} holds a {type(value).__name__} ({value!r:.60}), which a saved program "
                    f"cannot describe as data")


def decode(data):
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    (tag, body), = [(k, v) for k, v in data.items() if k not in ("dtype", "shape")] or [("dtype", data["dtype"])]
    if tag == "tuple":
        return tuple(decode(v) for v in body)
    if tag == "dict":
        return {_hashable(decode(k)): decode(v) for k, v in body}
    if tag == "float":
        return float(body)
    if tag == "slice":
        return slice(*[decode(v) for v in body])
    if tag == "ellipsis":
        return Ellipsis
    if tag == "dtype":
        return dtype_lib.to_dtype(body)
    if tag == "npdtype":
        return np.dtype(dtype_lib.to_dtype(body).np) if body in dtype_lib._BY_NAME else np.dtype(body)
    if tag == "sbp":
        return sbp_of_text(body)
    if tag == "placement":
        return placement_of(body)
    if tag == "complex":
        return complex(*body)
    if tag == "array":
        return np.array(decode(body), dtype=dtype_lib.to_dtype(data["dtype"]).np).reshape(data["shape"])
    raise ValueError(f"graph.load: unknown value tag {tag!r}")


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def placement_data(p):
    return {"type": p.type, "ranks": p.ranks.tolist()}


def placement_of(data):
    return Placement(data["type"], data["ranks"])


def layout_data(lay):
    if lay is None:
        return None
    return {"shape": list(lay.shape), "dtype": lay.dtype.name, "placement": placement_data(lay.placement),
            "sbp": [str(s) for s in lay.sbp]}


def layout_of(data):
    if data is None:
        return None
    return Layout.of(tuple(data["shape"]), dtype_lib.to_dtype(data["dtype"]), placement_of(data["placement"]),
                     tuple(sbp_of_text(s) for s in data["sbp"]))


# --- the program ----------------------------------------------------------------------------------
REG_FACTS = ("kind", "escapes", "note", "root", "owns", "numpy", "contiguous", "device")


def program_data(program):
    """The manifest of one rank's program (without its pieces)."""
    regs = [dict({k: getattr(reg, k) for k in REG_FACTS}, layout=layout_data(reg.layout),
                 local_shape=list(reg.local_shape), dtype=_dtype_name(reg.dtype)) for reg in program.regs]
    instrs = []
    for i, ins in enumerate(program.instrs):
        detail = None if ins.kind == "box" else encode(ins.detail, f"instruction {i} ({ins.kind} {ins.name})")
        instrs.append({"kind": ins.kind, "name": ins.name, "ins": ins.ins, "outs": ins.outs, "plain": ins.plain,
                       "detail": detail, "hints": ins.hints})
    return {"label": program.label, "regs": regs, "instrs": instrs, "inputs": program.inputs,
            "outputs": program.outputs, "roles": program.roles, "tree": tree_data(getattr(program, "tree", None))}


def _dtype_name(np_dtype):
    return dtype_lib._BY_NP[np.dtype(np_dtype)].name


def tree_data(tree):
    if tree is None:
        return None
    head = tree[0]
    if head == "T":
        return {"T": tree[1], "layout": layout_data(tree[2])}
    if head == "V":
        return {"V": encode(tree[1], "an output")}
    if head is dict:
        return {"D": [[encode(k), tree_data(v)] for k, v in tree[1:]]}
    return {"S": "list" if head is list else "tuple", "items": [tree_data(v) for v in tree[1:]]}


def tree_of(data):
    if data is None:
        return None
    if "T" in data:
        return ("T", data["T"], layout_of(data["layout"]))
    if "V" in data:
        return ("V", decode(data["V"]))
    if "D" in data:
        return (dict,) + tuple((_hashable(decode(k)), tree_of(v)) for k, v in data["D"])
    return (list if data["S"] == "list" else tuple,) + tuple(tree_of(v) for v in data["items"])


# --- files ----------------------------------------------------------------------------------------
def write(path, manifest, pieces, rank, world_size):
    """rank's manifest and pieces under directory `path` (each file written whole, then renamed)."""
    from safetensors.numpy import save_file
    os.makedirs(path, exist_ok=True)
    arrays, kinds = {}, {}
    for name, piece in pieces.items():
        host = np.ascontiguousarray(piece if isinstance(piece, np.ndarray) else piece.get())
        kinds[name] = {"dtype": _dtype_name(host.dtype), "shape": list(host.shape)}
        arrays[name] = host if kinds[name]["dtype"] in _PLAIN_DTYPES else host.reshape(-1).view(np.uint8)
    manifest = dict(manifest, format=FORMAT, version=VERSION, rank=rank, world_size=world_size, pieces=kinds)
    _atomic(os.path.join(path, f"rank{rank}.safetensors"), lambda tmp: save_file(arrays, tmp))
    _atomic(os.path.join(path, f"rank{rank}.json"), lambda tmp: _write_json(tmp, manifest))
    if rank == 0:
        index = {"format": FORMAT, "version": VERSION, "world_size": world_size, "label": manifest["label"]}
        _atomic(os.path.join(path, "program.json"), lambda tmp: _write_json(tmp, index))


def read(path, rank=None, world_size=None):
    """(manifest, pieces) of `rank` (this process's by default) from directory `path`."""
    from safetensors.numpy import load_file
    rank = get_rank() if rank is None else rank
    world_size = get_world_size() if world_size is None else world_size
    index_path = os.path.join(path, "program.json")
    if not os.path.exists(index_path):
        raise FileNotFoundError(f"graph.load: {path} holds no saved program (no program.json)")
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"graph.load: {index_path} is not a saved program's index ({e})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or index.get("version", 0) > VERSION:
        raise ValueError(f"graph.load: {path} is {index.get('format')} version {index.get('version')}; this "
                         f"globaltensor reads {FORMAT} up to version {VERSION}")
    if index["world_size"] != world_size:
        raise ValueError(f"graph.load: {path} was saved by {index['world_size']} ranks; this job has {world_size} "
                         f"(each rank loads the pieces it saved)")
    with open(os.path.join(path, f"rank{rank}.json")) as f:
        manifest = json.load(f)
    raw = load_file(os.path.join(path, f"rank{rank}.safetensors"))
    pieces = {}
    for name, kind in manifest["pieces"].items():
        np_dtype = dtype_lib.to_dtype(kind["dtype"]).np
        array = raw[name]
        pieces[name] = array if kind["dtype"] in _PLAIN_DTYPES else array.view(np_dtype).reshape(kind["shape"])
    return manifest, pieces


def _write_json(tmp, data):
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)


def _atomic(final, write_to):
    tmp = f"{final}.tmp{os.getpid()}"
    write_to(tmp)
    os.replace(tmp, final)


def state_tensor(piece, layout, requires_grad):
    t = Tensor(piece) if layout is None else Tensor._wrap(piece, layout)
    if requires_grad:
        t.requires_grad_(True)
    return t


# --- export ----------------------------------------------------------------------------------------
_REFUSED = {"host": "a step computed outside the dispatcher (a copy)", "start": "a planned bucket (save the "
            "captured program: program.unplanned())", "wait": "a planned bucket"}


def export(program, state_tensors=None, path=None, tree=None, generator=None, extra=None, rank=None,
           world_size=None):
    """Write `program` (its captured form: program.unplanned()) and the pieces of the state it
    reads to directory `path`, this rank's part (every rank of the job calls it). `state_tensors`
    ({name: tensor}) overrides the tensors its read instructions name (Paddle's scope); `extra`
    ({key: JSON data}) joins the manifest (a face's names: Paddle's feeds and fetches); `rank` and
    `world_size` name a program local to one process (a rank-independent one: rank 0 of 1)."""
    if path is None:
        raise TypeError("graph.export(program, state_tensors, path): path is required")
    tree = getattr(program, "tree", None) if tree is None else tree
    data_form = program.unplanned()
    state_tensors = dict(state_tensors or {})
    pieces, tensors, scalars = {}, {}, {}
    read = {ins.name for ins in data_form.instrs if ins.kind == "read"}
    for i, ins in enumerate(data_form.instrs):
        _refuse(ins, i, read)
        if ins.kind in ("read", "grad", "set") and ins.name not in tensors:
            t = state_tensors.get(ins.name)
            if t is None:
                t = ins.fn if ins.kind == "read" else getattr(ins.fn, "leaf", getattr(ins.fn, "t", None))
            lay = data_form.regs[(ins.outs or ins.ins)[0]].layout
            pieces[ins.name] = t._local
            tensors[ins.name] = {"layout": layout_data(lay),
                                 "requires_grad": bool(getattr(t, "requires_grad", False))}
        elif ins.kind == "const":
            pieces[f"const/{ins.outs[0]}"] = ins.fn
        elif ins.kind == "scalar":
            scalars[ins.name] = encode(_number(ins.fn()), f"scalar {ins.name}")
    manifest = program_data(data_form)
    # the stream the draws continue: the default one, or a loaded program's own
    seed, counter = get_rng_state() if generator is None else (generator._stream.seed, generator._stream.counter)
    manifest.update(tree=tree_data(tree), tensors=tensors, scalars=scalars,
                    stream=[str(seed), counter])
    manifest.update(extra or {})
    write(path, manifest, pieces, get_rank() if rank is None else rank,
          get_world_size() if world_size is None else world_size)


def _refuse(ins, i, read):
    """Raise (before anything is written) for an instruction that is Python code rather than data."""
    why = _REFUSED.get(ins.kind)
    if why is None and ins.kind == "grad" and ins.name not in read:
        why = "the gradient of a tensor the call passes in (not state the program reads)"
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
