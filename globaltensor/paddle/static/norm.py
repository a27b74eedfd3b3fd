"""Paddle's batch_norm op recorded into a static program (static.nn.batch_norm; paddle.nn's in static mode)."""
import itertools

from ... import ops as _ops

_LAYERS = itertools.count()  # generated names of a layer's moving statistics: batch_norm_layer_k.w_1 / .w_2


def record_batch_norm(program, input, moving_mean, moving_var, scale, shift, training, momentum, epsilon, names=None):
    """Paddle's batch_norm op recorded into the main program (static.nn.batch_norm's, and
    paddle.nn.BatchNorm*D's and F.batch_norm's in static mode): in training the batch's
    statistics normalize and moving = momentum * moving + (1 - momentum) * the batch's (biased
    variance) at each run; clone(for_test=True) swaps in the form normalizing by the moving ones.
    moving_mean/var: tensors that become state of the program (names: Paddle's, else generated)."""
    if names is None:
        prefix = f"batch_norm_layer_{next(_LAYERS)}"
        names = (f"{prefix}.w_1", f"{prefix}.w_2")
    c = input.shape[1]
    moving = [_moving(program, t, n) for t, n in zip((moving_mean, moving_var), names)]
    axes, shape = [0] + list(range(2, input.ndim)), [1, c] + [1] * (input.ndim - 2)

    def normalized(mean, var):
        inv = _ops.rsqrt(var + epsilon)
        if scale is not None:
            inv = inv * scale
        shifted = -mean * inv if shift is None else shift - mean * inv
        return input * _ops.reshape(inv, *shape) + _ops.reshape(shifted, *shape)

    with program.hint("batch_norm"):
        if not training:
            return normalized(*moving)
        for p in (scale, shift):  # read before the training form: the inference form reads them too
            if p is not None:
                program.reg_of(p, "batch_norm")
        start = len(program.instrs)
        mean = _ops.mean(input, dim=axes)
        var = _ops.mean(_ops.square(input - _ops.reshape(mean, *shape)), dim=axes)
        out = normalized(mean, var)
        for stat, batch in zip(moving, (mean, var)):
            stat.add_((batch - stat) * (1.0 - momentum))  # the program reads it at each run and sets it after
        end = len(program.instrs)
        at_inference, test_out = program.recorded_apart(lambda: normalized(*moving))
    out_reg, test_reg = program.reg_of(out, "batch_norm"), program.reg_of(test_out, "batch_norm")
    for ins in at_inference:
        ins.outs = [out_reg if r == test_reg else r for r in ins.outs]
    program.test_switches.append((start, end, at_inference))
    return out


def _moving(program, value, name):
    """A moving statistic: a persistable tensor the program reads (before the op's training form,
    so that its inference form reads it too)."""
    program.names[program.reg_of(value, "batch_norm")] = name
    return value
