"""DataParallel for local tensors (as Paddle's and PyTorch's): every rank runs the module on its
own batch, and after each backward the gradients are averaged over the ranks in buckets."""
import numpy as np

from .. import autograd
from ..env import get_world_size
from ..tensor import Tensor
from . import collectives


class DataParallel:
    """Wraps a module of local tensors. Rank 0's parameters are broadcast at construction;
    backward then averages the gradients (buckets of comm_buffer_size MB, the last one
    last_comm_buffer_size MB). Inside `no_sync()` gradients accumulate without communication."""

    def __init__(self, module, comm_buffer_size=25, last_comm_buffer_size=1, find_unused_parameters=False):
        self.module = module
        self.bucket_bytes = int(comm_buffer_size * (1 << 20))
        self.last_bucket_bytes = int(last_comm_buffer_size * (1 << 20))
        self.find_unused_parameters = find_unused_parameters
        self._params = [p for p in module.parameters() if p.requires_grad]
        if any(p.is_global for p in self._params):
            raise ValueError("DataParallel wraps modules of local tensors; a global module is data-parallel "
                             "already with to_global(placement, broadcast)")
        self._syncing = True
        for p in self._params:  # every rank starts from rank 0's values
            collectives.broadcast(p._local, src=0)
        autograd.post_backward_hooks.append(self._after_backward)

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["module"], name)

    def parameters(self):
        return self.module.parameters()

    def no_sync(self):
        return _NoSync(self)

    def _buckets(self):
        """Parameters in reverse order (gradients of the last layers are ready first)."""
        buckets, current, size = [], [], 0
        for i, p in enumerate(reversed(self._params)):
            limit = self.last_bucket_bytes if i == 0 else self.bucket_bytes
            if current and size + p._local.nbytes > limit:
                buckets.append(current)
                current, size = [], 0
            current.append(p)
            size += p._local.nbytes
        if current:
            buckets.append(current)
        return buckets

    def _after_backward(self, updated):
        if not self._syncing or get_world_size() == 1 or not any(id(p) in updated for p in self._params):
            return
        world = get_world_size()
        for bucket in self._buckets():
            grads = [p.grad._local if p.grad is not None else np.zeros_like(p._local) for p in bucket]
            flat = collectives.empty_shared((sum(g.size for g in grads),), grads[0].dtype)
            np.concatenate([g.reshape(-1) for g in grads], out=flat)
            collectives.all_reduce(flat)
            flat /= world
            start = 0
            for p, g in zip(bucket, grads):
                p.grad = Tensor(flat[start:start + g.size].reshape(g.shape))
                start += g.size

    def state_dict(self):
        return self.module.state_dict()

    def load_state_dict(self, state, strict=True):
        return self.module.load_state_dict(state, strict)


class _NoSync:
    def __init__(self, dp):
        self.dp = dp

    def __enter__(self):
        self.dp._syncing = False

    def __exit__(self, *exc):
        self.dp._syncing = True
