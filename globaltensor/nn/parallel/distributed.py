"""nn.parallel.DistributedDataParallel as OneFlow and PyTorch spell it, over gt's DataParallel."""
from typing import Any, Optional, Sequence

from ...autograd import no_grad
from ...data_parallel import DataParallel
from ...backends.devices import of_array
from ...env import get_world_size
from ..module import Module

__all__ = ["DistributedDataParallel"]


def DistributedDataParallel(module: Module, device_ids: Optional[Sequence[int]] = None,  # noqa: N802 - the peers' name
                            output_device: Any = None, dim: int = 0, broadcast_buffers: bool = True,
                            process_group: Any = None, bucket_cap_mb: float = 25,
                            find_unused_parameters: bool = False, *, broadcast_parameters: bool = True,
                            bucket_size: Optional[int] = None, use_bucket: bool = True, **pytorch_options: Any) -> Module:
    """Data parallelism for a module of local tensors: every rank runs it on its own batch and
    backward averages the gradients over the ranks in buckets (each bucket's all_reduce starts as
    its gradients finish), so the parameters stay equal on every rank.

    As OneFlow's, it returns the module itself, ready to call (`model = DDP(model)`); as
    PyTorch's, `model.module` is the module and `model.no_sync()` skips the reduction. Rank 0's
    parameters are broadcast first (broadcast_parameters), and its buffers before each forward
    (broadcast_buffers). Parameters with requires_grad=False are left alone; with
    find_unused_parameters=True a parameter that gets no gradient contributes zeros without
    holding its bucket back. bucket_cap_mb (PyTorch) sizes the buckets; OneFlow's bucket_size
    (parameters a bucket) and use_bucket are accepted, the buckets being sized in bytes.
    device_ids, output_device, dim and PyTorch's other tuning options change nothing here: each
    rank's module runs where its tensors are. A process_group other than the whole job is refused.

    Examples:
        >>> model = gt.nn.parallel.DistributedDataParallel(gt.nn.Linear(8, 2))
        >>> model(x).sum().backward()     # .grad is the mean over the ranks' batches
    """
    if process_group is not None and sorted(getattr(process_group, "ranks", ())) != list(range(get_world_size())):
        raise ValueError("DistributedDataParallel: gradients are averaged over the whole job; a process_group of "
                         "some ranks is not supported (use a global model on a placement of those ranks instead)")
    dp = DataParallel(module, comm_buffer_size=bucket_cap_mb, find_unused_parameters=find_unused_parameters,
                      broadcast_parameters=broadcast_parameters)
    object.__setattr__(module, "_gt_data_parallel", dp)  # keeps its buckets (autograd holds sinks weakly)
    object.__setattr__(module, "module", module)  # PyTorch's ddp.module; not a child (no "module." keys)
    if broadcast_buffers and get_world_size() > 1:
        module.register_forward_pre_hook(_broadcast_buffers)
    return module


def _broadcast_buffers(module, inputs):
    """Rank 0's buffers (BatchNorm's running statistics) on every rank before each forward."""
    with no_grad():
        for b in module.buffers():
            if b is not None and b.is_local:
                of_array(b._local).collectives.broadcast(b._local, src=0)
