"""BatchNorm1d/2d/3d (ops.batch_norm: two per-channel primitives), GroupNorm and RMSNorm (composites). On
global tensors with the batch split over ranks, BatchNorm's statistics are over the global batch
(SyncBatchNorm by construction: the per-channel sums come out partial and the dispatcher sums
them)."""
import ml_dtypes

from .. import hooks, ops
from ..creation import ones, zeros
from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "RMSNorm", "group_norm", "rms_norm"]


class _BatchNorm(Module):
    """Normalise each channel (dim 1) by the batch's mean and variance in training (updating the
    running statistics in place, unbiased variance, momentum), by the running ones in eval."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight, self.bias = Parameter(ones(num_features)), Parameter(zeros(num_features))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features))
            self.register_buffer("running_var", ones(num_features))
            self.register_buffer("num_batches_tracked", zeros((), dtype="int64"))  # PyTorch's state_dict key
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, input):
        use_batch = self.training or not self.track_running_stats
        momentum = self.momentum if self.training else 0.0
        if self.training and self.track_running_stats:  # a graph's capture records the count, run at each replay
            hooks.effect(f"{type(self).__name__}.num_batches_tracked", lambda: self.num_batches_tracked.add_(1))
            if self.momentum is None:  # PyTorch's cumulative average: 1 / the batches seen
                momentum = 1.0 / float(self.num_batches_tracked.to_local().numpy())
        return ops.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              training=use_batch, momentum=momentum, eps=self.eps)


class BatchNorm1d(_BatchNorm):
    """[N, C] or [N, C, L] inputs."""


class BatchNorm2d(_BatchNorm):
    """[N, C, H, W] inputs."""


class BatchNorm3d(_BatchNorm):
    """[N, C, D, H, W] inputs."""


class GroupNorm(Module):
    """Normalise each sample over groups of num_channels / num_groups channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels {num_channels} must divide by num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight, self.bias = Parameter(ones(num_channels)), Parameter(zeros(num_channels))

    def forward(self, input):
        return group_norm(input, self.num_groups, self.weight if self.affine else None,
                          self.bias if self.affine else None, self.eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Each sample normalised over groups of C / num_groups channels, then weight and bias per channel."""
    n = input.shape[0]
    grouped = input.reshape(n, num_groups, -1)
    mean = grouped.mean(2, keepdim=True)
    centered = grouped - mean
    var = (centered * centered).mean(2, keepdim=True)
    out = (centered * ops.rsqrt(var + eps)).reshape(*input.shape)
    shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    return out + bias.reshape(shape) if bias is not None else out


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """input / sqrt(mean(input^2 over the normalized dims) + eps) * weight (eps None: the dtype's
    machine epsilon, as PyTorch)."""
    dims = tuple(range(-len(tuple(normalized_shape)), 0))
    eps = float(ml_dtypes.finfo(input.dtype.np).eps) if eps is None else eps
    out = input * ops.rsqrt((input * input).mean(dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


class RMSNorm(Module):
    """Root-mean-square normalisation over the last dims (PyTorch's nn.RMSNorm; LLaMA's norm)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)
