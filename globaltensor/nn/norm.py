"""BatchNorm1d/2d (ops.batch_norm: two per-channel primitives) and GroupNorm (a composite). On
global tensors with the batch split over ranks, BatchNorm's statistics are over the global batch
(SyncBatchNorm by construction: the per-channel sums come out partial and the dispatcher sums
them)."""
from .. import ops
from ..creation import ones, zeros
from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm"]


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
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)

    def forward(self, input):
        use_batch = self.training or not self.track_running_stats
        return ops.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              training=use_batch, momentum=self.momentum if self.training else 0.0, eps=self.eps)


class BatchNorm1d(_BatchNorm):
    """[N, C] or [N, C, L] inputs."""


class BatchNorm2d(_BatchNorm):
    """[N, C, H, W] inputs."""


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
        n = input.shape[0]
        grouped = input.reshape(n, self.num_groups, -1)
        mean = grouped.mean(2, keepdim=True)
        centered = grouped - mean
        var = (centered * centered).mean(2, keepdim=True)
        out = (centered * ops.rsqrt(var + self.eps)).reshape(*input.shape)
        if self.affine:
            shape = (1, self.num_channels) + (1,) * (input.ndim - 2)
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out
