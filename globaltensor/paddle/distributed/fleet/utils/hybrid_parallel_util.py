"""fused_allreduce_gradients: average the parameters' gradients over the ranks, in buckets."""
import numpy as np

from .....distributed import collectives
from .....env import get_world_size
from .....grad_buckets import pack

BUCKET_BYTES = 128 << 20


def fused_allreduce_gradients(parameter_list, hcg=None):
    """Each local parameter's .grad becomes the mean over the ranks (Paddle's data-parallel
    average): the gradients are packed into flat buffers of at most 128 MB, one all_reduce each."""
    grads = [p.grad for p in parameter_list if p.grad is not None]
    world = get_world_size()
    if world == 1 or not grads:
        return
    if any(g.is_global for g in grads):
        raise ValueError("fused_allreduce_gradients averages local gradients (paddle.DataParallel's); a global "
                         "model's gradients are reduced by its backward")
    by_dtype = {}
    for g in grads:
        by_dtype.setdefault(g._local.dtype, []).append(g)
    for dtype, group in by_dtype.items():
        for chunk in pack(group, [g._local.nbytes for g in group], lambda i: BUCKET_BYTES):
            flat = collectives.empty_shared((sum(g._local.size for g in chunk),), dtype)
            np.concatenate([g._local.reshape(-1) for g in chunk], out=flat)
            collectives.all_reduce(flat)
            flat /= world
            at = 0
            for g in chunk:  # written back into each gradient's own array (a graph keeps knowing it)
                n = g._local.size
                g._local[...] = flat[at:at + n].reshape(g._local.shape)
                at += n
