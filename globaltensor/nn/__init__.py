"""Neural-network modules: Module, Parameter, layers, losses, functional, init."""
from . import functional, init
from .layers import (GELU, CrossEntropyLoss, Dropout, Embedding, LayerNorm, Linear, ModuleList, MSELoss, ReLU,
                     Sequential)
from .module import Module, Parameter
from .activation import Flatten, Identity, LeakyReLU, LogSoftmax, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiHeadAttention
from .transformer import TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer
from .container import ModuleDict, ParameterList
from .loss import BCEWithLogitsLoss, KLDivLoss, L1Loss, NLLLoss, SmoothL1Loss
from ..graph import Graph
from . import utils  # noqa: E402


__all__ = ["Graph", "Module", "Parameter", "Linear", "ReLU", "GELU", "Dropout", "Embedding", "LayerNorm", "Sequential",
           "ModuleList", "MSELoss", "CrossEntropyLoss", "functional", "init", "utils", "SiLU", "Softmax", "LogSoftmax",
           "Tanh", "Sigmoid", "LeakyReLU", "Identity", "Flatten", "ModuleDict", "ParameterList", "L1Loss",
           "SmoothL1Loss", "NLLLoss", "BCEWithLogitsLoss", "KLDivLoss", "MultiHeadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer"]
