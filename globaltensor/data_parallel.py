"""DataParallel for local tensors (as Paddle's and PyTorch's): every rank runs the module on its
own batch, and backward averages the gradients over the ranks in buckets, each bucket's
all_reduce started as soon as its gradients are done."""
from . import autograd, grad_buckets
from .distributed import collectives
from .env import get_world_size
from .scope import current as _scope


class DataParallel:
    """Wraps a module of local tensors. Rank 0's parameters are broadcast at construction
    (unless broadcast_parameters=False: each rank keeps its own).
    Backward averages the gradients in buckets of comm_buffer_size MB (the first bucket, the
    last layers', last_comm_buffer_size MB), in reverse parameter order on every rank.

    A parameter that gets no gradient in a backward contributes zeros. With
    find_unused_parameters=True such parameters are found when backward starts (by walking
    the graph), so their buckets need not wait for the end of backward; without it a bucket
    holding one starts at the end. Inside `no_sync()` gradients accumulate locally."""

    def __init__(self, module, comm_buffer_size=25, last_comm_buffer_size=1, find_unused_parameters=False,
                 broadcast_parameters=True):
        self.module = module
        self.bucket_bytes = int(comm_buffer_size * (1 << 20))
        self.last_bucket_bytes = int(last_comm_buffer_size * (1 << 20))
        self.find_unused_parameters = find_unused_parameters
        self._params = [p for p in module.parameters() if p.requires_grad]
        if any(p.is_global for p in self._params):
            raise ValueError("DataParallel wraps modules of local tensors; a global module is data-parallel "
                             "already with to_global(placement, broadcast)")
        self._syncing = True
        for p in self._params if broadcast_parameters else ():  # every rank starts from rank 0's values
            collectives.broadcast(p._local, src=0)
        order = list(reversed(self._params))  # gradients of the last layers are ready first
        self._plan = grad_buckets.pack(
            order, [p._local.nbytes for p in order],
            lambda i: self.last_bucket_bytes if i == 0 else self.bucket_bytes)
        autograd.sinks.add(self)

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["module"], name)

    def parameters(self):
        return self.module.parameters()

    def no_sync(self):
        return _NoSync(self)

    def begin(self, run):
        """autograd's sink protocol: this backward's Buckets, or None when nothing of ours is reduced."""
        state = _scope.get()
        if not (self._syncing and state.sync) or get_world_size() == 1:
            return None
        reached = {id(leaf) for leaf in run.leaves}
        if not any(id(p) in reached for p in self._params):
            return None
        if state.recorder is not None:
            raise RuntimeError("backward inside a graph: DataParallel reduces gradients in buckets the graph cannot "
                               "record (DataParallel of local tensors); make the model global (to_global with "
                               "broadcast parameters) to capture it")
        flats = grad_buckets.flat_buffers(self._plan)
        buckets = grad_buckets.Buckets(self._plan, grad_buckets.launch_local, grad_buckets.land_local, flats)
        buckets.offer(run.order)
        if self.find_unused_parameters:
            for p in self._params:
                if id(p) not in reached:
                    buckets.ready(p, None)
        return buckets

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


def no_sync(model=None):
    """Inside: backward accumulates partial gradients without communicating."""
    return grad_buckets.no_sync()


set_bucket_size = grad_buckets.set_bucket_size
