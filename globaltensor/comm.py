"""OneFlow's flow.comm: collectives on local tensors over every rank of the job, in place."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from . import dtype as _dtype
from .backends.devices import device as _device, of_array
from .distributed import collectives as _host
from .env import get_rank, get_world_size
from .tensor import Tensor

__all__ = ["all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
           "broadcast", "scatter", "gather", "reduce", "all_to_all", "barrier", "send", "recv"]

_META = 10  # a send's header: ndim, up to 8 dims, the dtype's code


def _local(t: Tensor, what: str) -> Tensor:
    if not isinstance(t, Tensor) or not t.is_local:
        raise TypeError(f"flow.comm.{what} takes local tensors (every rank its own); got "
                        f"{'a global tensor: use to_global instead' if isinstance(t, Tensor) else type(t).__name__}")
    return t


def _set(t: Tensor, piece) -> None:
    """t's values become `piece`'s (t keeps its dtype and device), as OneFlow's in-place collectives."""
    t._local = of_array(t._local).asarray(piece).astype(t._local.dtype, copy=False).reshape(t._local.shape)


def _coll(t: Tensor):
    return of_array(t._local).collectives


def _stacked(tensors: Sequence[Tensor], what: str):
    if len(tensors) != get_world_size():
        raise ValueError(f"flow.comm.{what}: a list of {len(tensors)} tensors in a job of {get_world_size()} ranks "
                         f"(one a rank)")
    return of_array(tensors[0]._local).xp.stack([_local(t, what)._local for t in tensors])


def all_reduce(tensor: Tensor) -> None:
    """Sum `tensor` over every rank, in place (every rank gets the same bits)."""
    x = _local(tensor, "all_reduce")._local.copy()
    _set(tensor, _coll(tensor).all_reduce(x))


def all_gather(tensor_list: List[Tensor], tensor: Tensor) -> None:
    """tensor_list[i] becomes rank i's `tensor` (the list's entries are replaced, as OneFlow does)."""
    x = _local(tensor, "all_gather")._local
    if len(tensor_list) != get_world_size():
        raise ValueError(f"flow.comm.all_gather: tensor_list has {len(tensor_list)} entries for {get_world_size()} ranks")
    rows = _coll(tensor).all_gather(x.reshape((1,) + x.shape).copy())
    for i in range(len(tensor_list)):
        tensor_list[i] = Tensor(rows[i].copy())


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor) -> None:
    """output_tensor becomes every rank's input, concatenated along dim 0 or stacked (by its shape)."""
    x = _local(input_tensor, "all_gather_into_tensor")._local
    _set(_local(output_tensor, "all_gather_into_tensor"), _coll(input_tensor).all_gather(x.reshape((1,) + x.shape).copy()))


def reduce_scatter(output: Tensor, input_list: List[Tensor]) -> None:
    """output becomes the sum over ranks of every rank's input_list[this rank]."""
    stacked = _stacked(input_list, "reduce_scatter")
    _set(_local(output, "reduce_scatter"), _coll(output).reduce_scatter(stacked, sizes=[1] * get_world_size()))


def reduce_scatter_tensor(output_tensor: Tensor, input_tensor: Tensor) -> None:
    """output_tensor becomes this rank's block (along dim 0) of the sum over ranks of input_tensor."""
    x = _local(input_tensor, "reduce_scatter_tensor")._local.copy()
    _set(_local(output_tensor, "reduce_scatter_tensor"), _coll(input_tensor).reduce_scatter(x))


def broadcast(tensor: Tensor, src: int) -> None:
    """Every rank's `tensor` becomes rank src's, in place."""
    x = _local(tensor, "broadcast")._local.copy()
    _set(tensor, _coll(tensor).broadcast(x, src=src))


def scatter(tensor: Tensor, scatter_list: Optional[List[Tensor]] = None, src: int = 0) -> None:
    """Rank i's `tensor` becomes rank src's scatter_list[i]."""
    _local(tensor, "scatter")
    n = get_world_size()
    if get_rank() == src:
        stacked, sizes = _stacked(scatter_list or [], "scatter"), [1] * n
    else:  # sends nothing, receives its row from src
        stacked, sizes = of_array(tensor._local).xp.empty((0,) + tensor._local.shape, tensor._local.dtype), [0] * n
    _set(tensor, _coll(tensor).all_to_all(stacked, sizes)[0])


def gather(tensor: Tensor, gather_list: Optional[List[Tensor]] = None, dst: int = 0) -> None:
    """gather_list[i] (on rank dst) becomes rank i's `tensor`."""
    x = _local(tensor, "gather")._local
    rows = _coll(tensor).all_gather(x.reshape((1,) + x.shape).copy())
    if get_rank() == dst:
        if gather_list is None or len(gather_list) != get_world_size():
            raise ValueError(f"flow.comm.gather: rank {dst} needs a gather_list of {get_world_size()} entries")
        for i in range(len(gather_list)):
            gather_list[i] = Tensor(rows[i].copy())


def reduce(tensor: Tensor, dst: int) -> None:
    """Rank dst's `tensor` becomes the sum over ranks; the others keep theirs."""
    x = _local(tensor, "reduce")._local.copy()
    total = _coll(tensor).all_reduce(x)
    if get_rank() == dst:
        _set(tensor, total)


def all_to_all(output_tensor_list: List[Tensor], input_tensor_list: List[Tensor]) -> None:
    """output_tensor_list[i] becomes rank i's input_tensor_list[this rank]."""
    stacked = _stacked(input_tensor_list, "all_to_all")
    if len(output_tensor_list) != get_world_size():
        raise ValueError(f"flow.comm.all_to_all: {len(output_tensor_list)} outputs for {get_world_size()} ranks")
    rows = _coll(input_tensor_list[0]).all_to_all(stacked, [1] * get_world_size())
    for i in range(len(output_tensor_list)):
        output_tensor_list[i] = Tensor(rows[i].copy())


def barrier() -> None:
    """Wait until every rank arrives."""
    _host.barrier()


def send(tensor: Tensor, dst: int, send_meta: bool = True) -> None:
    """Send `tensor` to rank dst (its shape and dtype first, unless send_meta=False)."""
    x = _local(tensor, "send")._local
    host = of_array(x).to_host(x) if of_array(x) is not _device("cpu") else np.ascontiguousarray(x)
    if send_meta:
        if host.ndim > _META - 2:
            raise ValueError(f"flow.comm.send: {host.ndim} dims; at most {_META - 2}")
        _host.send(np.array([host.ndim, *host.shape, *[0] * (_META - 2 - host.ndim),
                             int(tensor.dtype.code)], np.int64), dst)
    _host.send(host, dst)


def recv(src: int, shape: Optional[Sequence[int]] = None, dtype: Any = None, device: Any = None,
         out: Optional[Tensor] = None) -> Optional[Tensor]:
    """What rank src sends: its shape and dtype come first unless shape, dtype and device are all
    given (the sender's send_meta=False). Into `out` when given (returns None), else a new tensor."""
    given = (shape is not None, dtype is not None, device is not None)
    if any(given) and not all(given):
        raise ValueError("flow.comm.recv: give shape, dtype and device together (send_meta=False), or none")
    if not any(given):
        meta = _host.recv(np.empty(_META, np.int64), src)
        shape, dt = tuple(int(d) for d in meta[1:1 + meta[0]]), _dtype.from_code(int(meta[-1]))
    else:
        dt = _dtype.to_dtype(dtype)
    host = _host.recv(np.empty(tuple(shape), dt.np), src)
    kind = str(device if device is not None else (out.device if out is not None else "cpu")).split(":")[0]
    piece = host if kind == "cpu" else _device(kind).from_host(host)
    if out is not None:
        _set(out, piece)
        return None
    return Tensor(piece)
