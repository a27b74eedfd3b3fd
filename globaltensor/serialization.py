"""save / load: tensors as .npy files plus a JSON tree in a directory, written atomically.

gt.save(obj, path, global_dst_rank=0): every rank calls it; global tensors are gathered and
rank `global_dst_rank` writes (None: each rank writes its own local values). gt.load(path,
global_src_rank=0): that rank reads and broadcasts to every rank; the values come back as
local tensors, and Module/Optimizer.load_state_dict lay them out by each parameter's
placement and SBP, so a checkpoint saved under one layout loads under any other.
"""
import json
import os
import shutil
import tempfile

import numpy as np

from . import dtype as _dtype
from .env import get_rank, get_world_size
from .tensor import Tensor

FORMAT = "globaltensor-checkpoint-1"


def _encode(obj, arrays):
    if isinstance(obj, Tensor):
        value = obj.numpy() if obj.is_global else obj._local
        name = f"t{len(arrays)}.npy"
        arrays[name] = value
        return {"__tensor__": name, "dtype": obj.dtype.name, "shape": list(value.shape)}
    if isinstance(obj, np.ndarray):
        name = f"a{len(arrays)}.npy"
        arrays[name] = obj
        return {"__array__": name, "dtype": str(obj.dtype), "shape": list(obj.shape)}
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__" if isinstance(obj, list) else "__tuple__": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"save: cannot store a {type(obj).__name__}; use tensors, arrays, numbers, strings, "
                    f"lists, tuples and dicts")


def _decode(node, arrays):
    if isinstance(node, dict):
        if "__tensor__" in node:
            return Tensor(arrays[node["__tensor__"]], dtype=_dtype.to_dtype(node["dtype"]))
        if "__array__" in node:
            return arrays[node["__array__"]]
        if "__dict__" in node:
            return {_decode(k, arrays): _decode(v, arrays) for k, v in node["__dict__"]}
        if "__list__" in node:
            return [_decode(v, arrays) for v in node["__list__"]]
        if "__tuple__" in node:
            return tuple(_decode(v, arrays) for v in node["__tuple__"])
    return node


def _storable(array):
    """bfloat16 is stored as its uint16 bits (the dtype is in the JSON)."""
    return array.view(np.uint16) if array.dtype == _dtype.bfloat16.np else array


def _write_dir(path, tree, arrays):
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        for name, array in arrays.items():
            np.save(os.path.join(tmp, name), _storable(np.ascontiguousarray(array)), allow_pickle=False)
        with open(os.path.join(tmp, "tree.json"), "w") as f:
            json.dump({"format": FORMAT, "tree": tree}, f)
        for name in os.listdir(tmp):
            fd = os.open(os.path.join(tmp, name), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        old = None
        if os.path.exists(path):  # keep the previous checkpoint until the new one is in place
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rmdir(old)
            os.rename(path, old)
        os.rename(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save(obj, path, global_dst_rank=0):
    """Write obj (state dicts, tensors, ...) to directory `path`; every rank must call it."""
    arrays = {}
    tree = _encode(obj, arrays)  # collective for global tensors: every rank gathers
    if global_dst_rank is None or get_rank() == global_dst_rank:
        _write_dir(path, tree, arrays)
    if get_world_size() > 1 and global_dst_rank is not None:
        from .env import barrier
        barrier()  # the file exists when save returns, on every rank


def _read_dir(path):
    with open(os.path.join(path, "tree.json")) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"load: {path} is not a globaltensor checkpoint (format {meta.get('format')!r})")
    arrays = {}
    _collect(meta["tree"], path, arrays)
    return meta["tree"], arrays


def _collect(node, path, arrays):
    if isinstance(node, dict):
        name = node.get("__tensor__") or node.get("__array__")
        if name:
            array = np.load(os.path.join(path, name), allow_pickle=False)
            dt = node["dtype"]
            arrays[name] = array.view(_dtype.bfloat16.np) if dt == "bfloat16" else array
            return
        for v in node.values():
            _collect(v, path, arrays)
    elif isinstance(node, list):
        for v in node:
            _collect(v, path, arrays)


def load(path, global_src_rank=0):
    """Read a checkpoint on rank global_src_rank and give its values to every rank (None:
    every rank reads the file itself)."""
    if global_src_rank is None or get_world_size() == 1:
        return _decode(*_read_dir(path))
    from .distributed import collectives as c
    if get_rank() == global_src_rank:
        tree, arrays = _read_dir(path)
        header = json.dumps({"tree": tree, "arrays": [[n, a.dtype.str if a.dtype != _dtype.bfloat16.np else
                                                       "bfloat16", list(a.shape)] for n, a in arrays.items()]})
        blob = np.frombuffer(header.encode(), np.uint8).copy()
        length = np.array([blob.size], np.int64)
    else:
        length = np.zeros(1, np.int64)
    c.broadcast(length, src=global_src_rank)
    if get_rank() != global_src_rank:
        blob = np.empty(int(length[0]), np.uint8)
    c.broadcast(blob, src=global_src_rank)
    header = json.loads(blob.tobytes().decode())
    received = {}
    for name, dt, shape in header["arrays"]:
        np_dtype = _dtype.bfloat16.np if dt == "bfloat16" else np.dtype(dt)
        buf = arrays[name] if get_rank() == global_src_rank else np.empty(shape, np_dtype)
        buf = np.ascontiguousarray(buf)
        c.broadcast(buf.view(np.uint8).reshape(-1), src=global_src_rank)
        received[name] = buf
    return _decode(header["tree"], received)
