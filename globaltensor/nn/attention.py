"""Attention: scaled_dot_product_attention (causal and padding masks), one registered primitive
("attention", ops/attention.py: its SBP rows keep heads, batch or query rows local) or, for what
it does not take, a composite of registered ops; and MultiHeadAttention."""
import math

from .. import ops
from ..ops._front import apply
from ..ops.attention import _check as check_attention
from ..tensor import Tensor
from ..creation import arange
from .layers import Linear
from .module import Module

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention"]


def _like(x, make):
    """A constant made next to x: global on x's placement (broadcast) when x is global."""
    if x.is_local:
        return make({})
    from ..sbp import broadcast
    return make({"placement": x.placement, "sbp": (broadcast,) * x.placement.ndim})


def causal_mask(query, key):
    """[Lq, Lk] bool, True where query i may attend: keys j <= i (PyTorch's top-left alignment when
    Lq != Lk)."""
    lq, lk = query.shape[-2], key.shape[-2]
    rows = _like(query, lambda kw: arange(lq, **kw)).unsqueeze(1)
    cols = _like(query, lambda kw: arange(lk, **kw)).unsqueeze(0)
    return cols <= rows


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v over the last two dims, PyTorch's semantics: a bool
    attn_mask is True where attention is allowed (a padding mask), a float one is added to the
    scores; is_causal lets query i see the keys j <= i (top-left aligned when the lengths differ,
    as PyTorch). scale defaults to
    1/sqrt(head dim). dropout_p drops attention weights (training).

    One primitive, "attention" (its backward one "attention_backward"), where it can be: q, k, v
    of one floating dtype (float32/float64) and one batch shape, a mask of bool or q's dtype that
    needs no gradient, no dropout. Anything else takes the composite of matmul, masked_fill,
    softmax, ... (_composite_attention), with the same values."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if not dropout_p and _fusable(query, key, value, attn_mask):
        inputs = [query, key, value] if attn_mask is None else [query, key, value, attn_mask]
        static = {"scale": float(scale), "is_causal": bool(is_causal)}
        if is_causal:
            static["diagonal"] = 0  # query i sees keys j <= i: PyTorch's top-left alignment when Lq != Lk
        return apply("attention", inputs, static, multi=True)[0]
    return _composite_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _fusable(query, key, value, attn_mask):
    """Whether the "attention" primitive takes these inputs: float32 or float64, a mask that needs
    no gradient, and the shapes and dtypes its meta accepts (anything else goes the composite way)."""
    ts = (query, key, value) if attn_mask is None else (query, key, value, attn_mask)
    if not all(isinstance(t, Tensor) for t in ts) or query.dtype.name not in ("float32", "float64") or \
            (attn_mask is not None and attn_mask.requires_grad):
        return False
    try:
        check_attention([tuple(t.shape) for t in ts], [t.dtype for t in ts])
    except (ValueError, TypeError):
        return False
    return True


def _composite_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """scaled_dot_product_attention as a composite of registered ops (their SBP rows and
    backward are those of matmul, masked_fill, softmax, ...): the way for what the primitive
    does not take (dropout, a mask that needs a gradient, mixed dtypes or batch shapes)."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = ops.matmul(query, key.transpose(-2, -1)) * scale
    allowed = causal_mask(query, key) if is_causal else None
    if attn_mask is not None:
        if attn_mask.dtype.name == "bool":
            allowed = attn_mask if allowed is None else ops.logical_and(allowed, attn_mask)
        else:
            scores = scores + attn_mask
    if allowed is not None:
        scores = ops.masked_fill(scores, ops.logical_not(allowed), float("-inf"))
    weights = ops.softmax(scores, -1)
    if dropout_p:
        weights = ops.dropout(weights, dropout_p, True)
    return ops.matmul(weights, value)


class MultiHeadAttention(Module):
    """Attention over num_heads heads of embed_dim // num_heads features, batch first: inputs
    [batch, seq, embed_dim]. Projections q_proj, k_proj, v_proj, out_proj are Linear layers, so
    Megatron's layout is a choice of SBP: q/k/v weights split by rows (S(0): whole heads per
    rank), out_proj's by columns (S(1)); every op between stays on its heads."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.q_proj = Linear(embed_dim, embed_dim, bias)
        self.k_proj = Linear(kdim or embed_dim, embed_dim, bias)
        self.v_proj = Linear(vdim or embed_dim, embed_dim, bias)
        self.out_proj = Linear(embed_dim, embed_dim, bias)

    def _heads(self, x):
        return ops.split_heads(x, self.num_heads)  # [batch, heads, seq, head_dim]

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(key)), self._heads(self.v_proj(value))
        out = scaled_dot_product_attention(q, k, v, attn_mask, self.dropout if self.training else 0.0, is_causal)
        return self.out_proj(ops.merge_heads(out))
