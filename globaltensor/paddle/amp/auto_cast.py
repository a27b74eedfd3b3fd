"""paddle.amp.auto_cast and decorate: Paddle's O1/O2 lists over gt's autocast policy, master weights."""
import contextlib
import contextvars
import functools

from ... import dtype as _dtype
from ...amp import lists
from ...amp.autocast_mode import Policy, using
from ...autograd import no_grad
from ...dispatch import AMP_ENTRIES
from ...registry import REGISTRY

# The dtype of the latest auto_cast entered in this context, kept after it exits, as Paddle's
# amp_global_state().amp_dtype (GradScaler.scale reads it: loss scaling is for float16 only).
last_amp_dtype = contextvars.ContextVar("globaltensor.paddle.amp_dtype", default="float32")
_LEVELS = ("O0", "OD", "O1", "O2")


def _gt_names(names):
    out = []
    for name in names or ():
        out += lists.PADDLE_NAMES.get(name, (name,))
    return tuple(out)


@functools.lru_cache(maxsize=32)
def _policy_ops(level, dtype_name, white, black):
    """{gt op name: dtype} of a Paddle level and custom lists (cached: a few entries per program)."""
    low = _dtype.to_dtype(dtype_name)
    if level == "O2":
        ops = {name: low for name in set(REGISTRY) | AMP_ENTRIES}
        keep = set(lists.PADDLE_O2_BLACK + black) - set(white)
        ops.update({name: _dtype.float32 for name in keep})
        return ops
    white_set = set(lists.PADDLE_WHITE + white) - set(black)
    black_set = (set(lists.PADDLE_BLACK) - set(white)) | set(black)
    ops = {name: low for name in white_set}
    ops.update({name: _dtype.float32 for name in black_set})
    if level == "OD":  # Paddle's OD: only the white list is cast
        ops = {name: low for name in white_set}
    return ops


@contextlib.contextmanager
def auto_cast(enable=True, custom_white_list=None, custom_black_list=None, level="O1", dtype="float16",
              use_promote=True):
    """paddle.amp.auto_cast: O1 runs Paddle's white list (matmul, linear, conv2d, attention) in dtype
    and its black list (softmax, losses, mean, sum, exp, log, pow, layer_norm, ...) in float32; O2 runs
    every op in dtype except embedding lookups and scatter. custom_white_list / custom_black_list take
    Paddle's op names ("matmul_v2", "reduce_sum", ...) or gt's. Unlike Paddle, which makes it a no-op
    on CPU places, it casts on CPU too (bfloat16/float16 as storage types, float32 compute)."""
    level = str(level).upper()
    if level not in _LEVELS:
        raise ValueError("level should be O0, OD, O1 or O2.")
    dtype = getattr(dtype, "name", dtype).lower()
    if enable and dtype not in ("float16", "bfloat16"):
        raise ValueError("If enable amp, dtype should be 'float16' or 'bfloat16'.")
    last_amp_dtype.set(dtype)
    if not enable or level == "O0":
        with using(None):
            yield
        return
    ops = dict(_policy_ops(level, dtype, _gt_names(custom_white_list), _gt_names(custom_black_list)))
    with using(Policy(None, _dtype.to_dtype(dtype), (), (), ops=ops)):
        yield


amp_guard = auto_cast


def is_float16_supported(device=None):
    return True


def is_bfloat16_supported(device=None):
    return True


_KEEP_FP32 = ("BatchNorm", "BatchNorm1D", "BatchNorm2D", "BatchNorm3D", "SyncBatchNorm", "LayerNorm", "InstanceNorm1D",
              "InstanceNorm2D", "InstanceNorm3D", "GroupNorm", "RMSNorm")


class MasterWeights:
    """An optimizer's float32 master weights for low-precision parameters (decorate O2): step() puts
    each parameter's gradient, in float32, on its master, runs the optimizer on the masters, and
    rounds the masters back into the parameters; the optimizer's state belongs to the masters."""

    def __init__(self, optimizer, step):
        self.optimizer, self._step = optimizer, step
        self.masters = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.dtype in (_dtype.float16, _dtype.bfloat16):
                    master = p.detach().float()
                    master.requires_grad = True
                    self.masters[id(p)] = (p, master)

    def __call__(self, *args, **kwargs):
        originals = [group["params"] for group in self.optimizer.param_groups]
        with no_grad():
            for p, master in self.masters.values():
                master.grad = None if p.grad is None else p.grad.float()
        for group in self.optimizer.param_groups:
            group["params"] = [self.masters.get(id(p), (p, p))[1] for p in group["params"]]
        try:
            return self._step(*args, **kwargs)
        finally:
            for group, params in zip(self.optimizer.param_groups, originals):
                group["params"] = params
            with no_grad():
                for p, master in self.masters.values():
                    p._local[...] = master._local.astype(p._local.dtype)


def decorate(models, optimizers=None, level="O1", dtype="float16", master_weight=None, save_dtype=None,
             master_grad=False, excluded_layers=None):
    """paddle.amp.decorate: O1 returns the models and optimizers as they are; O2 casts the models'
    floating parameters to dtype (normalisation layers and excluded_layers kept in float32) and,
    unless master_weight=False, gives each optimizer float32 master weights."""
    level = str(level).upper()
    if level not in ("O1", "O2"):
        raise ValueError("level should be O1 or O2, O1 represent AMP train mode, O2 represent Pure fp16/bf16 "
                         "train mode.")
    if level == "O1":
        return models if optimizers is None else (models, optimizers)
    low = _dtype.to_dtype(dtype)
    excluded = excluded_layers if isinstance(excluded_layers, (list, tuple)) else \
        ([excluded_layers] if excluded_layers is not None else [])
    for model in (models if isinstance(models, (list, tuple)) else [models]):
        _cast_layers(model, low, excluded)
    opts = optimizers if isinstance(optimizers, (list, tuple)) else ([optimizers] if optimizers is not None else [])
    if master_weight is not False:
        for opt in opts:
            opt.step = MasterWeights(opt, opt.step)  # this optimizer's own attribute
    return models if optimizers is None else (models, optimizers)


def _keep(layer, excluded):
    return type(layer).__name__ in _KEEP_FP32 or any(
        layer is e or (isinstance(e, type) and isinstance(layer, e)) for e in excluded)


def _cast_layers(model, low, excluded):
    for layer in model.sublayers(include_self=True) if hasattr(model, "sublayers") else model.modules():
        if _keep(layer, excluded):
            continue
        for p in layer._parameters.values():
            if p is not None and p.dtype.is_floating and p.dtype is not _dtype.float64:
                with no_grad():
                    p._local = p._local.astype(low.np)
                    p._dtype = low


__all__ = ["auto_cast", "amp_guard", "decorate", "is_float16_supported", "is_bfloat16_supported", "last_amp_dtype"]
