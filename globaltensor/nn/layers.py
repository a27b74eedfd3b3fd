"""Layers and losses over the ops of globaltensor.ops (global tensors work unchanged)."""
import collections
import math

from .. import ops
from ..autograd import no_grad
from .. import creation
from . import init
from .container import Positional
from .module import Module, Parameter


def _empty_param(*shape):
    return Parameter(creation.empty(*shape))


class Linear(Module):
    """y = x @ weight.T + bias; weight has shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _empty_param(out_features, in_features)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if bias:
            self.bias = _empty_param(out_features)
            bound = 1 / math.sqrt(in_features) if in_features else 0.0
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature; the result is a new tensor

    def forward(self, x):
        return ops.relu(x)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, self.approximate)


class Dropout(Module):
    """Sharding-invariant mask: the same elements drop whatever the layout."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return ops.dropout(x, self.p, self.training)


class Embedding(Module):
    """A table of num_embeddings rows; row padding_idx (negative counts from the end) starts at
    zero and gets no gradient, as PyTorch's. `_weight=` (PyTorch's and OneFlow's) gives the table
    itself, of shape (num_embeddings, embedding_dim), kept as it is."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("Embedding: max_norm and scale_grad_by_freq are not supported")
        self.sparse = bool(sparse)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} is outside the {num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                 f"({num_embeddings}, {embedding_dim}) (num_embeddings, embedding_dim)")
            self.weight = Parameter(_weight.detach())
            return
        self.weight = _empty_param(num_embeddings, embedding_dim)
        init.normal_(self.weight)
        if padding_idx is not None:
            with no_grad():
                self.weight[padding_idx] = 0

    def forward(self, x):
        return ops.embedding(x, self.weight, self.padding_idx, sparse=self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding holding `embeddings` (2-D) as its table, trained unless freeze (PyTorch's)."""
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, dim = embeddings.shape
        layer = cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings)
        layer.weight.requires_grad = not freeze
        return layer


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*self.normalized_shape))
            if bias:
                self.bias = Parameter(creation.zeros(*self.normalized_shape))
            else:  # PyTorch 2.1's bias=False: a scale only
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Sequential(Module):
    """Modules applied in order; built from modules or from one OrderedDict of named modules.
    A slice is a Sequential of the same modules under their names (a pipeline stage cut from a
    model keeps the model's parameter names)."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], collections.OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
            return
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(collections.OrderedDict(list(self._modules.items())[i]))
        return list(self.children())[i]

    def __len__(self):
        return len(self._modules)


class ModuleList(Positional):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        self.add_module(str(len(self._modules)), m)
        return self


class MSELoss(Module):
    """PyTorch's signature (size_average and reduce are the legacy spellings of reduction)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.size_average, self.reduce, self.reduction = size_average, reduce, reduction

    def forward(self, input, target):
        return ops.mse_loss(input, target, size_average=self.size_average, reduce=self.reduce,
                            reduction=self.reduction)


class CrossEntropyLoss(Module):
    """PyTorch's signature: class weights, ignore_index, reduction, label_smoothing."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__()
        self.register_buffer("weight", weight)  # PyTorch's: in the state_dict when given
        self.size_average, self.ignore_index = size_average, ignore_index
        self.reduce, self.reduction, self.label_smoothing = reduce, reduction, label_smoothing

    def forward(self, input, target):
        return ops.cross_entropy(input, target, weight=self.weight, size_average=self.size_average,
                                 ignore_index=self.ignore_index, reduce=self.reduce, reduction=self.reduction,
                                 label_smoothing=self.label_smoothing)
