"""Transformer layers (PyTorch's signatures and mask conventions): TransformerEncoderLayer,
TransformerEncoder, TransformerDecoderLayer, built from MultiHeadAttention, Linear, LayerNorm and
Dropout, so a layout of their weights (heads and feed-forward split Megatron's way) needs no
change here."""
import copy

from .. import ops
from .activation import silu
from .attention import MultiHeadAttention
from .layers import Dropout, LayerNorm, Linear, ModuleList
from .module import Module

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer"]

_ACTIVATIONS = {"relu": ops.relu, "gelu": ops.gelu, "silu": silu}


def _allowed(attn_mask, key_padding_mask):
    """PyTorch's masks (bool: True means *not* attended; float: added) -> SDPA's (bool: True
    means attended; float: added), the key padding mask [batch, keys] broadcast over heads and
    queries."""
    allowed = None
    if attn_mask is not None:
        allowed = ops.logical_not(attn_mask) if attn_mask.dtype.name == "bool" else attn_mask
    if key_padding_mask is not None:
        keep = ops.logical_not(key_padding_mask).unsqueeze(1).unsqueeze(1)  # [batch, 1, 1, keys]
        if allowed is None:
            allowed = keep
        elif allowed.dtype.name == "bool":
            allowed = ops.logical_and(allowed, keep)
        else:
            allowed = ops.masked_fill(allowed * 1.0, ops.logical_not(keep), float("-inf"))
    return allowed


class _Block(Module):
    """What encoder and decoder layers share: the feed-forward, the activation, batch_first."""

    def _init_ff(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first):
        self.linear1, self.linear2 = Linear(d_model, dim_feedforward), Linear(dim_feedforward, d_model)
        self.dropout, self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.norm1, self.norm2 = LayerNorm(d_model, eps=layer_norm_eps), LayerNorm(d_model, eps=layer_norm_eps)
        self.activation = _ACTIVATIONS[activation] if isinstance(activation, str) else activation
        self.batch_first, self.norm_first = batch_first, norm_first

    def _ff(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _batch_first(self, x):
        return x if self.batch_first or x is None else x.transpose(0, 1)


class TransformerEncoderLayer(_Block):
    """Self-attention then feed-forward, each with a residual; LayerNorm after (or, norm_first,
    before) each."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout)
        self._init_ff(d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first)

    def _sa(self, x, mask, is_causal):
        return self.dropout1(self.self_attn(x, attn_mask=mask, is_causal=is_causal))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = self._batch_first(src)
        mask = _allowed(src_mask, src_key_padding_mask)
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask, is_causal)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, mask, is_causal))
            x = self.norm2(x + self._ff(x))
        return self._batch_first(x)


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (each its own parameters, starting equal), then norm."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        if norm is not None:
            self.norm = norm
        else:
            self.register_parameter("norm", None)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(_Block):
    """Self-attention over the target, attention over the memory, feed-forward; each with a
    residual and a LayerNorm (after, or before with norm_first)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout)
        self.multihead_attn = MultiHeadAttention(d_model, nhead, dropout)
        self._init_ff(d_model, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first)
        self.norm3, self.dropout3 = LayerNorm(d_model, eps=layer_norm_eps), Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x, mem = self._batch_first(tgt), self._batch_first(memory)
        self_mask = _allowed(tgt_mask, tgt_key_padding_mask)
        cross_mask = _allowed(memory_mask, memory_key_padding_mask)

        def sa(y):
            return self.dropout1(self.self_attn(y, attn_mask=self_mask, is_causal=tgt_is_causal))

        def ca(y):
            return self.dropout2(self.multihead_attn(y, mem, mem, attn_mask=cross_mask, is_causal=memory_is_causal))

        def ff(y):
            return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(y)))))

        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ca(self.norm2(x))
            x = x + ff(self.norm3(x))
        else:
            x = self.norm1(x + sa(x))
            x = self.norm2(x + ca(x))
            x = self.norm3(x + ff(x))
        return self._batch_first(x)
