"""The directory format: tensors as .npy files plus a JSON tree, written atomically; sharded.

save_dir(obj, path, global_dst_rank): every rank calls it; global tensors are gathered and rank
`global_dst_rank` writes (None: each rank writes its own local values). load_dir(path,
global_src_rank): that rank reads and broadcasts to every rank; the values come back as local
tensors, and Module/Optimizer.load_state_dict lay them out by each parameter's placement and
SBP, so a checkpoint saved under one layout loads under any other. sharded=True: each rank
writes the pieces it holds, read back lazily (ShardedTensor).
"""
import hashlib
import json
import os
import re
import shutil
import tempfile

import numpy as np

from .. import dtype as _dtype
from ..distributed import job_barrier
from ..env import get_rank, get_world_size
from ..tensor import Tensor

FORMAT = "globaltensor-checkpoint-1"


def _encode(obj, arrays):
    if isinstance(obj, Tensor):
        value = obj.numpy()  # a global tensor's whole value, a local one's piece, on the host
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


def _decode(node, arrays, path=None):
    if isinstance(node, dict):
        if "__sharded__" in node:
            return ShardedTensor(path, node)
        if "__tensor__" in node:
            return Tensor(arrays[node["__tensor__"]], dtype=_dtype.to_dtype(node["dtype"]))
        if "__array__" in node:
            return arrays[node["__array__"]]
        if "__dict__" in node:
            return {_decode(k, arrays, path): _decode(v, arrays, path) for k, v in node["__dict__"]}
        if "__list__" in node:
            return [_decode(v, arrays, path) for v in node["__list__"]]
        if "__tuple__" in node:
            return tuple(_decode(v, arrays, path) for v in node["__tuple__"])
    return node


def _storable(array):
    """bfloat16 is stored as its uint16 bits (the dtype is in the JSON)."""
    return array.view(np.uint16) if array.dtype == _dtype.bfloat16.np else array


def _start_time(pid):
    """Process pid's start time (/proc/PID/stat field 22), or None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state, *fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if state in ("Z", "X") else fields[18]


def _owner():
    """This process as 'HOST-PID-START' for temporary directory names (HOST: host and PID namespace)."""
    from ..distributed.world import host_key
    try:
        pid_ns = os.stat("/proc/self/ns/pid").st_ino  # pids name the same process only within one
    except OSError:
        pid_ns = ""
    host = hashlib.sha256(f"{host_key()}/{pid_ns}".encode()).hexdigest()[:12]
    return f"{host}-{os.getpid()}-{_start_time(os.getpid())}"


def _fresh_tmp(path):
    """A new temporary directory for `path`, named after this process; removes those of dead writers."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    prefix, me = f".{os.path.basename(path)}.tmp-", _owner()
    # Only names from this host and PID namespace are checked; those from other hosts, and names
    # without an owner (versions before this one: .NAME.tmp-XXXXXXXX, .NAME.tmp-JOBID), stay.
    owned = re.compile(re.escape(prefix) + r"([0-9a-f]{12})-(\d+)-(\d+)-\w+")
    if _start_time(os.getpid()) is not None:  # without /proc, live writers look like dead ones
        for name in os.listdir(parent):
            match = owned.fullmatch(name)
            if match and match[1] == me.split("-")[0] and _start_time(int(match[2])) != match[3]:
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{prefix}{me}-", dir=parent)


_sharded_saves = [0]  # every rank counts its sharded saves alike (SPMD): one store key each


def _shared_tmp(path):
    """The temporary directory of a sharded save: rank 0 cleans stale ones and makes it, and
    hands its name (or its error) to the others through the store, which spans machines."""
    from ..distributed.world import world
    w = world()
    key = f"save/tmp/{_sharded_saves[0]}"
    _sharded_saves[0] += 1
    if w.rank == 0:
        try:
            name = "ok:" + os.path.basename(_fresh_tmp(path))
        except OSError as exc:
            name = f"error:{type(exc).__name__}: {exc}"
        if w.world_size > 1:
            w.join()
            w.store.set(key, name.encode())
    else:
        w.join()
        name = w.store.get(key, watch=[0]).decode()
    kind, _, text = name.partition(":")
    if kind == "error":
        raise OSError(f"gt.save(sharded=True): rank 0 could not make the temporary directory beside {path}: {text}")
    return text


def _write_dir(path, tree, arrays):
    def fill(tmp):
        for name, array in arrays.items():
            np.save(os.path.join(tmp, name), _storable(np.ascontiguousarray(array)), allow_pickle=False)
        with open(os.path.join(tmp, "tree.json"), "w") as f:
            json.dump({"format": FORMAT, "tree": tree}, f)
    write_tree(path, fill)


def write_tree(path, fill, writes=True):
    """Directory `path` made atomically: fill(tmp) writes into a fresh temporary directory beside
    it (named after this process; stale ones of dead writers are removed), which then replaces
    `path`; the previous checkpoint stays until the new one is in place. A rank that does not
    write calls fill("") (it may still take part in collectives)."""
    if not writes:
        fill("")
        return
    tmp = _fresh_tmp(path)
    try:
        fill(tmp)
        _synced(tmp)
        _replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_file(path, blob):
    """File `path` holding `blob`, written atomically (through a temporary directory beside it)."""
    tmp = _fresh_tmp(path)
    try:
        with open(os.path.join(tmp, "data"), "wb") as f:
            f.write(blob)
        _synced(tmp)
        _replace(os.path.join(tmp, "data"), path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _synced(tmp):
    for name in os.listdir(tmp):
        fd = os.open(os.path.join(tmp, name), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def _replace(new, path):
    """Rename `new` to `path`; an existing checkpoint (file or directory) goes only once it is."""
    parent = os.path.dirname(os.path.abspath(path)) or "."
    old = None
    if os.path.isdir(path) or (os.path.isdir(new) and os.path.exists(path)):
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
        os.rmdir(old)
        os.rename(path, old)
    os.replace(new, path)
    if old:
        shutil.rmtree(old, ignore_errors=True) if os.path.isdir(old) else os.remove(old)


def save_dir(obj, path, global_dst_rank=0, sharded=False):
    """Write obj (state dicts, tensors, ...) to directory `path`; every rank must call it.
    sharded=True: each rank writes the pieces it holds (no gather), plus a shared index."""
    if sharded:
        return _save_sharded(obj, path)
    arrays = {}
    tree = _encode(obj, arrays)  # collective for global tensors: every rank gathers
    if global_dst_rank is None or get_rank() == global_dst_rank:
        _write_dir(path, tree, arrays)
    if get_world_size() > 1 and global_dst_rank is not None:
        job_barrier()  # the file exists when save returns, on every rank


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
        if "__sharded__" in node:
            return
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


def load_dir(path, global_src_rank=0):
    """Read a checkpoint on rank global_src_rank and give its values to every rank (None:
    every rank reads the file itself)."""
    with open(os.path.join(path, "tree.json")) as f:
        if json.load(f).get("sharded"):
            return _load_sharded(path)
    if global_src_rank is None or get_world_size() == 1:
        return _decode(*_read_dir(path))
    from ..distributed import collectives as c
    header = None
    if get_rank() == global_src_rank:
        tree, arrays = _read_dir(path)
        header = json.dumps({"tree": tree, "arrays": [[n, a.dtype.str if a.dtype != _dtype.bfloat16.np else
                                                       "bfloat16", list(a.shape)] for n, a in arrays.items()]})
    header = json.loads(broadcast_bytes(None if header is None else header.encode(), global_src_rank).decode())
    received = {}
    for name, dt, shape in header["arrays"]:
        np_dtype = _dtype.bfloat16.np if dt == "bfloat16" else np.dtype(dt)
        buf = arrays[name] if get_rank() == global_src_rank else np.empty(shape, np_dtype)
        buf = np.ascontiguousarray(buf)
        c.broadcast(buf.view(np.uint8).reshape(-1), src=global_src_rank)
        received[name] = buf
    return _decode(header["tree"], received)


def broadcast_bytes(blob, src):
    """Rank src's bytes (blob; None elsewhere) on every rank: its length, then the bytes."""
    from ..distributed import collectives
    length = np.array([0 if blob is None else len(blob)], np.int64)
    collectives.broadcast(length, src=src)
    data = np.frombuffer(blob, np.uint8).copy() if blob is not None else np.empty(int(length[0]), np.uint8)
    collectives.broadcast(data, src=src)
    return data.tobytes()


# --- sharded checkpoints --------------------------------------------------------------------

class ShardedTensor:
    """A tensor of a sharded checkpoint, read lazily: `load_state_dict` reads only the slices
    that overlap the target piece; numpy() reads everything."""

    def __init__(self, path, node):
        self.path, self.shape, self.pieces = path, tuple(node["shape"]), node["pieces"]
        self.dtype = _dtype.to_dtype(node["dtype"])

    def read_box(self, box):
        """The values of `box` ((start, stop) per dim), from the overlapping piece files only."""
        from ..layout import intersect
        out = np.empty(tuple(b - a for a, b in box), self.dtype.np)
        for piece in self.pieces:
            part = intersect([tuple(p) for p in piece["box"]], box)
            if part is None and len(box):
                continue
            data = np.load(os.path.join(self.path, piece["file"]), mmap_mode="r", allow_pickle=False)
            if self.dtype.name == "bfloat16":
                data = data.view(self.dtype.np)
            part = part or []
            src = tuple(slice(a - p0, b - p0) for (a, b), (p0, _) in zip(part, piece["box"]))
            dst = tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(part, box))
            out[dst] = data[src]
        return out

    def numpy(self):
        return self.read_box([(0, n) for n in self.shape])


def _save_sharded(obj, path):
    """Every rank writes its pieces into a temporary directory; rank 0 writes the index and
    renames it into place once all have finished."""
    from .. import layout
    from ..distributed.world import job_id
    from ..sbp import broadcast, partial_sum, without_partial
    parent = os.path.dirname(os.path.abspath(path)) or "."
    me = get_rank()
    tmp = os.path.join(parent, _shared_tmp(path))
    counter = [0]

    def encode(value):
        if isinstance(value, Tensor) and value.is_global:
            t = value
            if partial_sum in t.sbp:  # resolve sums first: pieces must be parts of the value
                t = t.to_global(sbp=without_partial(t.sbp))
            name = f"s{counter[0]}"
            counter[0] += 1
            pieces = []
            for r in t.placement.rank_list():
                coord = t.placement.mesh_coord(r)
                if any(c != 0 for s, c in zip(t.sbp, coord) if s is broadcast):
                    continue  # one replica writes
                box = layout.local_box(t.shape, t.placement.hierarchy, t.sbp, coord)
                pieces.append({"file": f"{name}.r{r}.npy", "box": [list(b) for b in box]})
                if r == me:
                    np.save(os.path.join(tmp, f"{name}.r{r}.npy"), _storable(np.ascontiguousarray(t.to_local().numpy())),
                            allow_pickle=False)
            return {"__sharded__": name, "dtype": t.dtype.name, "shape": list(t.shape), "pieces": pieces}
        if isinstance(value, dict):
            return {"__dict__": [[encode(k), encode(v)] for k, v in value.items()]}
        if isinstance(value, (list, tuple)):
            return {"__list__" if isinstance(value, list) else "__tuple__": [encode(v) for v in value]}
        arrays = {}
        node = _encode(value, arrays)
        if me == 0:
            for n, a in arrays.items():
                np.save(os.path.join(tmp, n), _storable(np.ascontiguousarray(a)), allow_pickle=False)
        return node

    tree = encode(obj)
    job_barrier()
    if me == 0:
        with open(os.path.join(tmp, "tree.json"), "w") as f:
            json.dump({"format": FORMAT, "sharded": True, "tree": tree}, f)
        old = None
        if os.path.exists(path):
            old = path + f".old-{job_id()}"
            os.rename(path, old)
        os.rename(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    job_barrier()


def _load_sharded(path):
    """The tree with ShardedTensor leaves (nothing is read yet)."""
    meta_path = os.path.join(path, "tree.json")
    with open(meta_path) as f:
        meta = json.load(f)
    arrays = {}
    _collect(meta["tree"], path, arrays)
    return _decode(meta["tree"], arrays, path)
