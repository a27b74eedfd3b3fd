"""fused_allreduce_gradients: average the parameters' gradients over the ranks, in buckets."""
import functools

from .....env import get_world_size
from .....grad_buckets import Buckets, flat_buffers, land_local, launch_local, pack

BUCKET_BYTES = 128 << 20


def fused_allreduce_gradients(parameter_list, hcg=None):
    """Each local parameter's .grad becomes the mean over the ranks (Paddle's data-parallel
    average): the gradients go to grad_buckets' Buckets of at most 128 MB (FlatBuffers kept from
    call to call), one all_reduce each, as DataParallel's backward files them; the means are
    copied back into each gradient's own array."""
    params = list({id(p): p for p in parameter_list if p.grad is not None}.values())  # each once
    world = get_world_size()
    if world == 1 or not params:
        return
    if any(p.grad.is_global for p in params):
        raise ValueError("fused_allreduce_gradients averages local gradients (paddle.DataParallel's); a global "
                         "model's gradients are reduced by its backward")
    by_dtype = {}  # a FlatBuffer holds one dtype: its parameters' (their gradients')
    for p in params:
        g = p.grad._local
        if g.dtype != p._local.dtype or g.shape != p._local.shape:
            raise ValueError(f"fused_allreduce_gradients: a gradient of dtype {g.dtype} and shape {g.shape} on a "
                             f"parameter of dtype {p._local.dtype} and shape {p._local.shape}")
        by_dtype.setdefault(g.dtype, []).append(p)
    for group in by_dtype.values():  # each gradient offered to buckets as backward's sinks offer it
        plan = pack(group, [p.grad._local.nbytes for p in group], lambda i: BUCKET_BYTES)
        buckets = Buckets(plan, launch_local, functools.partial(land_local, into_own=True), flat_buffers(plan))
        for p in group:
            buckets.take(p, p.grad)
        buckets.finish()
