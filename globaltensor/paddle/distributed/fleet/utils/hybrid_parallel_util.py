"""fused_allreduce_gradients: average the parameters' gradients over the ranks, in buckets."""
from .....distributed import collectives
from .....env import get_world_size
from .....grad_buckets import fill, flat_buffers, pack

BUCKET_BYTES = 128 << 20


def fused_allreduce_gradients(parameter_list, hcg=None):
    """Each local parameter's .grad becomes the mean over the ranks (Paddle's data-parallel
    average): the gradients are copied into flat buffers of at most 128 MB (grad_buckets'
    FlatBuffers, kept from call to call), one all_reduce each, and the means copied back."""
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
    for group in by_dtype.values():
        plan = pack(group, [p.grad._local.nbytes for p in group], lambda i: BUCKET_BYTES)
        for bucket, flat in zip(plan, flat_buffers(plan)):
            buffer = fill(flat, {id(p): p.grad._local for p in bucket})
            collectives.all_reduce(buffer)
            buffer /= world
            for p, view in zip(bucket, flat.views):  # back into each gradient's own array (a graph keeps knowing it)
                p.grad._local[...] = view
