"""Strategy.amp for dist.to_static: the step under Paddle's auto_cast lists, O2 master weights, float16 loss scaling."""
from ...amp.autocast_mode import Policy
from ... import dtype as _dtype
from ..amp.auto_cast import _gt_names, _policy_ops, decorate
from ..amp.grad_scaler import GradScaler


def check_amp(amp):
    """Bad Strategy.amp fields raise before anything runs."""
    if not amp.enable:
        return
    if amp.dtype not in ("float16", "bfloat16"):
        raise ValueError(f"Strategy.amp.dtype must be 'float16' or 'bfloat16', got {amp.dtype!r}")
    if amp.level.lower() not in ("o1", "o2"):
        raise ValueError(f"Strategy.amp.level must be 'o1' or 'o2', got {amp.level!r}")


def apply_amp(layer, optimizer, strategy):
    """amp.level o2: the layer's parameters in amp.dtype, float32 master weights in the optimizer
    (amp.use_master_weight), as paddle.amp.decorate(level='O2')."""
    amp = strategy.amp
    check_amp(amp)
    if amp.enable and amp.level.lower() == "o2":
        decorate(layer, optimizer, level="O2", dtype=amp.dtype, master_weight=amp.use_master_weight)


def amp_scaler(amp):
    """float16 with use_dynamic_loss_scaling: Paddle's GradScaler from the amp fields (bfloat16
    trains unscaled, as Paddle)."""
    if amp.dtype != "float16" or not amp.use_dynamic_loss_scaling:
        return None
    return _Scaler(init_loss_scaling=amp.init_loss_scaling, incr_ratio=amp.incr_ratio, decr_ratio=amp.decr_ratio,
                   incr_every_n_steps=amp.incr_every_n_steps, decr_every_n_nan_or_inf=amp.decr_every_n_nan_or_inf)


class _Scaler(GradScaler):
    """Paddle's GradScaler as a graph's grad scaler (graph/amp_step.py reads get_scale)."""

    def get_scale(self):
        return self._scale


def amp_policy(amp, scaler):
    """The autocast policy of the train/eval/predict build: Paddle's lists for amp.level and dtype,
    custom_white_list / custom_black_list; None when amp is off."""
    if amp is None or not amp.enable:
        return None
    ops = dict(_policy_ops(amp.level.upper(), amp.dtype, _gt_names(amp.custom_white_list),
                           _gt_names(amp.custom_black_list)))
    return Policy(None, _dtype.to_dtype(amp.dtype), (), (), ops=ops,
                  loss_scale=scaler.get_scale() if scaler is not None else None)


__all__ = ["apply_amp", "amp_scaler", "amp_policy", "check_amp"]
