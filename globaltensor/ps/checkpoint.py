"""Server checkpoints: each server's blocks and rows in safetensors with a JSON manifest, loadable under any server count."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from .partition import server_blocks, server_of_ids
from .spec import JobSpec
from .tables import DenseBlock, SparseTable

FORMAT = "globaltensor.ps.checkpoint"
VERSION = 1
_MANIFEST = re.compile(r"manifest_(\d+)\.json$")


def save_server(dirname: str, job: JobSpec, index: int, dense_blocks: dict[str, DenseBlock],
                sparse_tables: dict[str, SparseTable]) -> None:
    """Write server `index`'s part: dirname/server_{index}/{dense,sparse}.safetensors, then (last, so a half-done
    save has no manifest) dirname/manifest_{index}.json. Server 0 also removes manifests an earlier save with more
    servers left behind. dense_blocks: {any key: DenseBlock}; sparse_tables: {name: SparseTable}."""
    folder = os.path.join(dirname, f"server_{index}")
    os.makedirs(folder, exist_ok=True)
    dense_arrays, dense_entries = {}, []
    for block in dense_blocks.values():
        b = block.block
        arrays = {key: f"{b.block_name}/{key}" for key in block.state()}
        dense_arrays.update({arrays[key]: np.ascontiguousarray(arr) for key, arr in block.state().items()})
        dense_entries.append({"name": b.name, "block_name": b.block_name, "index": b.index, "row_start": b.row_start,
                              "row_end": b.row_end, "param_shape": list(b.param_shape), "arrays": arrays})
    sparse_arrays, sparse_entries = {}, []
    for name, table in sparse_tables.items():
        state = table.state()
        arrays = {key: f"{name}/{key}" for key in state}
        sparse_arrays.update({arrays[key]: np.ascontiguousarray(arr) for key, arr in state.items()})
        sparse_entries.append({"name": name, "dim": table.spec.dim, "rows": len(table), "arrays": arrays})
    files = {}
    for kind, arrays in (("dense", dense_arrays), ("sparse", sparse_arrays)):
        rel = f"server_{index}/{kind}.safetensors"
        _atomic(os.path.join(dirname, rel), lambda tmp, a=arrays: save_file(a, tmp))
        files[rel] = os.path.getsize(os.path.join(dirname, rel))
    manifest = {"format": FORMAT, "version": VERSION, "server": index, "servers": len(job.servers),
                "endpoints": list(job.servers), "rule": job.rule.kind, "files": files,
                "dense": dense_entries, "sparse": sparse_entries}
    _atomic(os.path.join(dirname, f"manifest_{index}.json"), lambda tmp: _write_text(tmp, json.dumps(manifest, indent=1)))
    if index == 0:
        for path, number in _manifest_paths(dirname):
            if number >= len(job.servers):
                os.remove(path)


def load_server(dirname: str, job: JobSpec, index: int) -> tuple[dict[str, DenseBlock], dict[str, SparseTable]]:
    """(dense_blocks {parameter name: DenseBlock}, sparse_tables {name: SparseTable}) for server `index` of `job`,
    whatever the server count and slicing of the save: dense rows (and their rule state) gathered from the old
    blocks they overlap; sparse rows (state and entry counts too) whose ids hash to `index` now."""
    manifests = read_manifests(dirname)
    with contextlib.ExitStack() as stack:
        files = _Files(dirname, stack)
        dense = {}
        for block in server_blocks(job, index):
            spec = next(d for d in job.dense if d.name == block.name)
            state = _dense_rows(manifests, files, block, spec)
            dense[block.name] = DenseBlock(block, state["value"], job.rule)
            dense[block.name].load_state(state)
        sparse = {}
        for spec in job.sparse:
            table = SparseTable(spec, job.rule)
            table.load_state(_sparse_rows(manifests, files, spec, len(job.servers), index))
            sparse[spec.name] = table
    return dense, sparse


def load_dense(dirname: str, name: str) -> np.ndarray:
    """The whole dense parameter `name` from a checkpoint (to serve it in a dygraph nn.Layer)."""
    manifests = read_manifests(dirname)
    entries = [dict(e, _m=m) for m in manifests for e in m["dense"] if e["name"] == name]
    if not entries:
        have = sorted({e["name"] for m in manifests for e in m["dense"]})
        raise KeyError(f"checkpoint {dirname} holds no dense parameter {name!r}; it holds {have}")
    shape = tuple(entries[0]["param_shape"])
    with contextlib.ExitStack() as stack:
        files = _Files(dirname, stack)
        return _gather_rows(entries, files, "value", 0, shape[0], shape, f"dense parameter {name!r}")


def read_manifests(dirname: str) -> list[dict]:
    """Every server's manifest of the save in `dirname`, by server index; raises ValueError on a foreign,
    truncated, incomplete or mixed set, or a data file whose size differs from the manifest's."""
    found = _manifest_paths(dirname)
    if not found:
        raise ValueError(f"{dirname}: no parameter-server checkpoint here (no manifest_<server>.json)")
    manifests = {}
    for path, number in found:
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a readable manifest (truncated or corrupt JSON: {e})") from None
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            got = m.get("format") if isinstance(m, dict) else type(m).__name__
            raise ValueError(f"{path}: not a globaltensor parameter-server manifest (format {got!r}, want {FORMAT!r})")
        if m.get("version") != VERSION:
            raise ValueError(f"{path}: manifest version {m.get('version')!r}, this reader knows {VERSION}")
        missing = [k for k in ("server", "servers", "files", "dense", "sparse") if k not in m]
        if missing or m["server"] != number:
            raise ValueError(f"{path}: incomplete manifest (missing {missing}, server {m.get('server')!r})")
        manifests[number] = m
    counts = {m["servers"] for m in manifests.values()}
    if len(counts) != 1 or sorted(manifests) != list(range(counts.pop())):
        raise ValueError(f"{dirname}: the manifests do not form one save: servers "
                         f"{ {k: m['servers'] for k, m in sorted(manifests.items())} } (each must name the same count "
                         "and every server 0..count-1 must be there)")
    for m in manifests.values():
        for rel, size in m["files"].items():
            path = os.path.join(dirname, rel)
            if not os.path.exists(path) or os.path.getsize(path) != size:
                have = os.path.getsize(path) if os.path.exists(path) else "missing"
                raise ValueError(f"{path}: {have} bytes, the manifest says {size} (truncated or replaced)")
    return [manifests[k] for k in sorted(manifests)]


class _Files:
    """safetensors files opened lazily once per load (arrays are read one by one, never the whole file)."""

    def __init__(self, dirname, stack):
        self.dirname, self.stack, self.open = dirname, stack, {}

    def get(self, manifest, kind, key):
        rel = f"server_{manifest['server']}/{kind}.safetensors"
        if rel not in self.open:
            self.open[rel] = self.stack.enter_context(safe_open(os.path.join(self.dirname, rel), framework="np"))
        return self.open[rel].get_tensor(key)


def _dense_rows(manifests, files, block, spec):
    entries = [dict(e, _m=m) for m in manifests for e in m["dense"] if e["name"] == block.name]
    if not entries:
        raise ValueError(f"the checkpoint holds no dense parameter {block.name!r} (the job's {spec.shape})")
    saved = tuple(entries[0]["param_shape"])
    if saved != tuple(spec.shape):
        raise ValueError(f"dense parameter {block.name!r}: the checkpoint's shape {saved}, the job's {tuple(spec.shape)}")
    what = f"dense parameter {block.name!r}"
    state = {"value": _gather_rows(entries, files, "value", block.row_start, block.row_end, saved, what)}
    keys = set.intersection(*(set(e["arrays"]) for e in entries)) - {"value", "step"}
    for key in keys:
        state[key] = _gather_rows(entries, files, key, block.row_start, block.row_end, saved, what)
    first = next(e for e in entries if e["row_start"] <= block.row_start < e["row_end"])
    if "step" in first["arrays"]:
        state["step"] = files.get(first["_m"], "dense", first["arrays"]["step"])
    return state


def _gather_rows(entries, files, key, start, end, shape, what):
    """Rows [start, end) of array `key` of a dense parameter, pieced together from the saved blocks (entries
    carry their manifest under "_m")."""
    out, covered = None, np.zeros(end - start, dtype=bool)
    for e in entries:
        lo, hi = max(start, e["row_start"]), min(end, e["row_end"])
        if lo >= hi or key not in e["arrays"]:
            continue
        piece = files.get(e["_m"], "dense", e["arrays"][key])
        if out is None:
            out = np.empty((end - start,) + tuple(shape[1:]), dtype=piece.dtype)
        out[lo - start:hi - start] = piece[lo - e["row_start"]:hi - e["row_start"]]
        covered[lo - start:hi - start] = True
    if out is None or not covered.all():
        raise ValueError(f"{what}: the checkpoint's blocks do not cover rows {start}:{end} of {key!r}")
    return out


def _sparse_rows(manifests, files, spec, n_servers, index):
    entries = [(m, e) for m in manifests for e in m["sparse"] if e["name"] == spec.name]
    if not entries:
        raise ValueError(f"the checkpoint holds no sparse table {spec.name!r}")
    parts = {}
    for m, e in entries:
        if e["dim"] != spec.dim:
            raise ValueError(f"sparse table {spec.name!r}: the checkpoint's dim {e['dim']}, the job's {spec.dim}")
        ids = files.get(m, "sparse", e["arrays"]["ids"])
        mine = server_of_ids(ids, n_servers) == index
        waiting = files.get(m, "sparse", e["arrays"]["entry_ids"]) if "entry_ids" in e["arrays"] else ids[:0]
        waiting_mine = server_of_ids(waiting, n_servers) == index
        for key, name in e["arrays"].items():
            arr = files.get(m, "sparse", name)
            keep = waiting_mine if key.startswith("entry_") else mine
            parts.setdefault(key, []).append(arr[keep] if arr.shape[:1] == keep.shape else arr[:0])
    return {key: np.concatenate(arrs) for key, arrs in parts.items()}


def _manifest_paths(dirname):
    out = []
    for path in glob.glob(os.path.join(glob.escape(dirname), "manifest_*.json")):
        match = _MANIFEST.search(os.path.basename(path))
        if match:
            out.append((path, int(match.group(1))))
    return sorted(out, key=lambda p: p[1])


def _write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def _atomic(path, write):
    tmp = f"{path}.tmp{os.getpid()}"
    write(tmp)
    os.replace(tmp, path)
