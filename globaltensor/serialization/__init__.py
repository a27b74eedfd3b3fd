"""save / load as OneFlow and PyTorch: one pickled file; directories for external data and shards."""
import os
import pickle

from ..env import get_rank, get_world_size
from . import directory, pickled
from .directory import FORMAT, ShardedTensor, load_dir, save_dir
from .pickled import GlobalTensorSaveError

__all__ = ["save", "load", "ShardedTensor", "GlobalTensorSaveError"]


def save(obj, path, global_dst_rank=None, save_as_external_data=False, sharded=False):
    """Write obj — any picklable object: a state dict, a whole Module, tensors in containers — to
    the file `path` (or a writable buffer), atomically; every rank must call it. Global tensors
    are gathered and rank `global_dst_rank` writes; without it a global tensor raises, as in
    OneFlow, and every rank writes its own local values. save_as_external_data=True: `path` is a
    directory with the pickle and one .npy file a tensor. sharded=True: a directory where each
    rank writes the pieces it holds (no gather), read back lazily.

    Examples:
        >>> gt.save(model.state_dict(), "model.pt", global_dst_rank=0)   # global parameters
        >>> model.load_state_dict(gt.load("model.pt"))                   # any layout, any ranks
    """
    if sharded:
        return save_dir(obj, path, sharded=True)
    if global_dst_rank is not None and not 0 <= global_dst_rank < get_world_size():
        raise ValueError(f"save: global_dst_rank {global_dst_rank} is outside [0, {get_world_size()})")
    writes = global_dst_rank is None or get_rank() == global_dst_rank
    if save_as_external_data:
        if pickled.is_buffer(path):
            raise ValueError("save: save_as_external_data writes a directory; give a path, not a buffer")
        directory.write_tree(path, lambda tmp: _external(obj, global_dst_rank, tmp, writes), writes)
    else:
        blob = pickled.dumps(obj, global_dst_rank)  # every rank: global tensors gather
        if writes:
            if pickled.is_buffer(path):
                path.write(blob)
                path.flush()
            else:
                directory.write_file(path, blob)
    if get_world_size() > 1 and global_dst_rank is not None:
        from ..distributed import job_barrier
        job_barrier()  # the file exists when save returns, on every rank


def _external(obj, global_dst_rank, tmp, writes):
    blob = pickled.dumps(obj, global_dst_rank, external=tmp)
    if writes:
        with open(os.path.join(tmp, pickled.EXTERNAL), "wb") as f:
            f.write(blob)


def load(path, global_src_rank=None, map_location=None, *, support_pytorch_format=True):
    """What save wrote (or a PyTorch .pt file of tensors, or an older globaltensor directory).
    global_src_rank=None: every rank reads the file; else that rank reads and hands the bytes to
    every rank. map_location: "cpu", "cuda", a device, a placement (tensors become global,
    broadcast), or a function (tensor, "cpu") -> tensor. Tensors come back local (or where
    map_location says); Module.load_state_dict lays them out by each parameter's layout.
    support_pytorch_format=False (OneFlow's): a PyTorch file raises ValueError. A file that is
    neither raises ValueError('Cannot load file "path"'), as OneFlow."""
    if not pickled.is_buffer(path):
        path = os.fspath(path)
        if os.path.isdir(path):
            if os.path.isfile(os.path.join(path, pickled.EXTERNAL)):
                blob = pickled.read_bytes(os.path.join(path, pickled.EXTERNAL))
                return pickled.loads(blob, map_location, external=path)
            return load_dir(path, 0 if global_src_rank is None else global_src_rank)
        if pickled.is_torch_file(path):
            if not support_pytorch_format:
                raise ValueError(f'Cannot load file "{path}": it is in PyTorch\'s format and support_pytorch_format '
                                 f'is False')
            return pickled.from_torch(path, map_location)
    if global_src_rank is None or get_world_size() == 1:
        blob = pickled.read_bytes(path)
    else:
        blob = pickled.read_bytes(path) if get_rank() == global_src_rank else None
        blob = directory.broadcast_bytes(blob, global_src_rank)
    try:
        return pickled.loads(blob, map_location)
    except (pickle.UnpicklingError, EOFError) as exc:  # every rank has the same bytes: all raise alike
        where = f'file "{path}"' if not pickled.is_buffer(path) else "the data"
        raise ValueError(f"Cannot load {where}: not a file gt.save (or torch.save) wrote ({exc})") from exc
