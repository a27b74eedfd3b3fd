"""Megatron's f and g as forward hooks: where a tensor-parallel layer's partial sums are reduced.

Layouts of the weights make a layer column- or row-parallel (q/k/v and the first feed-forward
Linear split by rows, S(0): whole heads and a slice of the hidden features per rank; the output
projections split by columns, S(1): each rank's product is a partial sum). Eager mode then
chooses each op's signature by the bytes that op moves; these hooks fix the two points where
Megatron reduces, so a block costs one all_reduce per sublayer forward and one backward:

    for blk in model.layers:
        tensor_parallel.reduce_input_grad(blk.self_attn)   # f: the input's gradient made whole
        tensor_parallel.reduce_output(blk.self_attn.out_proj)  # g: the partial output made whole
"""
from ..sbp import without_partial

__all__ = ["reduce_output", "reduce_input_grad"]


def _whole_output(module, args, out):
    return out.to_global(sbp=without_partial(out.sbp))


def _whole_input_grad(module, args):
    x = args[0]
    return (x.to_global(grad_sbp=x.sbp),) + tuple(args[1:])


def reduce_output(module):
    """g: the module's partial output (a row-parallel product; one global tensor) reduced at
    once, one all_reduce, so the residual stream stays whole; its gradient comes back whole,
    with no collective. Returns the hook's handle."""
    return module.register_forward_hook(_whole_output)


def reduce_input_grad(module):
    """f: the module's first argument (a global tensor) passes as it is; its gradient (partial:
    each rank's share of the features of column-parallel layers) is reduced where it leaves, one
    all_reduce. Returns the hook's handle."""
    return module.register_forward_pre_hook(_whole_input_grad)
