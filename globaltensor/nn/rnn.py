"""Recurrent layers with PyTorch's API, parameters and numerics: RNN, LSTM, GRU and their cells,
composites of linear, sigmoid and tanh (gradients and SBP from those ops)."""
import math

import numpy as np

from ..creation import empty
from ..ops import concat, dropout, linear, sigmoid, stack, tanh
from ..ops._front import constant_full
from . import init
from .activation_fns import relu
from .module import Module, Parameter

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(mode, gi, state, w_hh, b_hh, w_hr=None):
    """One time step of one layer from gi = the input's projection x W_ih^T + b_ih (computed for
    the whole sequence at once): state -> new state (h, or (h, c) for LSTM)."""
    if mode == "LSTM":
        h, c = state
        i, f, g, o = (gi + linear(h, w_hh, b_hh)).chunk(4, -1)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h = sigmoid(o) * tanh(c)
        return (h if w_hr is None else linear(h, w_hr)), c
    if mode == "GRU":
        gi_r, gi_z, gi_n = gi.chunk(3, -1)
        gh_r, gh_z, gh_n = linear(state, w_hh, b_hh).chunk(3, -1)
        r, z = sigmoid(gi_r + gh_r), sigmoid(gi_z + gh_z)
        n = tanh(gi_n + r * gh_n)
        return n + z * (state - n)
    pre = gi + linear(state, w_hh, b_hh)
    return tanh(pre) if mode == "RNN_TANH" else relu(pre)


def _zeros(like, shape):
    return constant_full(shape, 0, like)


class _CellBase(Module):
    mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, bias=True, mode=None):
        super().__init__()
        self.mode = mode or self.mode
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = Parameter(empty(gates, input_size))
        self.weight_hh = Parameter(empty(gates, hidden_size))
        if bias:
            self.bias_ih, self.bias_hh = Parameter(empty(gates)), Parameter(empty(gates))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def forward(self, input, hx=None):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: expected input of 1 or 2 dims, got shape {tuple(input.shape)}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            zero = _zeros(x, (x.shape[0], self.hidden_size))
            hx = (zero, zero) if self.mode == "LSTM" else zero
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(0)
        out = _rnn_step(self.mode, linear(x, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh)
        if batched:
            return out
        return tuple(o.squeeze(0) for o in out) if self.mode == "LSTM" else out.squeeze(0)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}"


class RNNCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r} (tanh or relu)")
        super().__init__(input_size, hidden_size, bias, "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU")
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    mode = "LSTM"


class GRUCell(_CellBase):
    mode = "GRU"


class _RNNBase(Module):
    mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, mode=None):
        super().__init__()
        self.mode = mode or self.mode
        if proj_size and (self.mode != "LSTM" or not 0 < proj_size < hidden_size):
            raise ValueError(f"proj_size {proj_size} must be in (0, hidden_size) and is only for LSTM")
        if not 0 <= dropout <= 1:
            raise ValueError(f"dropout should be a number in range [0, 1], got {dropout}")
        self.input_size, self.hidden_size, self.num_layers, self.bias = input_size, hidden_size, num_layers, bias
        self.batch_first, self.dropout, self.bidirectional = batch_first, dropout, bidirectional
        self.proj_size = proj_size
        gates, dirs, out_size = _GATES[self.mode] * hidden_size, 2 if bidirectional else 1, proj_size or hidden_size
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = input_size if layer == 0 else out_size * dirs
                setattr(self, "weight_ih" + sfx, Parameter(empty(gates, width)))
                setattr(self, "weight_hh" + sfx, Parameter(empty(gates, out_size)))
                if bias:
                    setattr(self, "bias_ih" + sfx, Parameter(empty(gates)))
                    setattr(self, "bias_hh" + sfx, Parameter(empty(gates)))
                if proj_size:
                    setattr(self, "weight_hr" + sfx, Parameter(empty(proj_size, hidden_size)))
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        return [getattr(self, n + sfx, None) for n in ("weight_ih", "bias_ih", "weight_hh", "bias_hh", "weight_hr")]

    def _initial(self, x, hx, dirs):
        shape = (self.num_layers * dirs, x.shape[1], self.proj_size or self.hidden_size)
        shapes = [shape, shape[:2] + (self.hidden_size,)] if self.mode == "LSTM" else [shape]
        if hx is None:
            zeros = [_zeros(x, sh) for sh in shapes]
            return tuple(zeros) if self.mode == "LSTM" else zeros[0]
        for h, want in zip(hx if self.mode == "LSTM" else (hx,), shapes):
            if tuple(h.shape) != want:
                raise RuntimeError(f"{type(self).__name__}: expected hidden size {want}, got {tuple(h.shape)}")
        return hx

    def forward(self, input, hx=None):
        batched = input.ndim == 3
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: expected input of 2 or 3 dims, got shape {tuple(input.shape)}")
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if hx is not None and not batched:
            hx = tuple(h.unsqueeze(1) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
        dirs = 2 if self.bidirectional else 1
        hx = self._initial(x, hx, dirs)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                state = (hx[0][k], hx[1][k]) if self.mode == "LSTM" else hx[k]
                w_ih, b_ih, w_hh, b_hh, w_hr = self._weights(layer, d)
                gis = linear(x, w_ih, b_ih).unbind(0)  # the input's part of every step, one product
                steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
                seq = [None] * x.shape[0]
                for t in steps:
                    state = _rnn_step(self.mode, gis[t], state, w_hh, b_hh, w_hr)
                    seq[t] = state[0] if self.mode == "LSTM" else state
                outs.append(stack(seq, 0))
                finals.append(state)
            x = concat(outs, -1) if dirs == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = dropout(x, self.dropout)
        if self.mode == "LSTM":
            h_n = (stack([s[0] for s in finals], 0), stack([s[1] for s in finals], 0))
        else:
            h_n = stack(finals, 0)
        if not batched:
            return x.squeeze(1), (tuple(h.squeeze(1) for h in h_n) if self.mode == "LSTM" else h_n.squeeze(1))
        return (x.transpose(0, 1) if self.batch_first else x), h_n

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"


class RNN(_RNNBase):
    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r} (tanh or relu)")
        super().__init__(*args, **kwargs, mode="RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU")
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    mode = "LSTM"


class GRU(_RNNBase):
    mode = "GRU"
