"""Neural-network modules: Module, Parameter, layers, losses, functional, init."""
from . import functional, init
from .layers import (GELU, CrossEntropyLoss, Dropout, Embedding, LayerNorm, Linear, ModuleList, MSELoss, ReLU,
                     Sequential)
from .module import Module, Parameter
from .activation import (CELU, ELU, GLU, SELU, Flatten, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, Identity,
                         LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU6, RReLU, Sigmoid, SiLU, Softmax,
                         Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold)
from .attention import MultiHeadAttention
from .transformer import TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer
from .container import ModuleDict, ParameterList
from .conv import Conv1d, Conv2d, Conv3d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
                      MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .resampling import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
                         Fold, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                         ReplicationPad3d, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d,
                         ZeroPad2d, ZeroPad3d)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, RMSNorm
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss,
                   KLDivLoss, L1Loss, MarginRankingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,
                   MultiMarginLoss, NLLLoss, NLLLoss2d, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                   TripletMarginLoss, TripletMarginWithDistanceLoss)
from .distance import CosineSimilarity, PairwiseDistance
from .ctc import CTCLoss
from .quantization import CoinFlip, FakeQuantization, MinMaxObserver, MovingAverageMinMaxObserver, Quantization
from ..graph import Graph
from . import common_types, graph, modules, parallel, tensor_parallel, utils  # noqa: E402


__all__ = ["Graph", "Module", "Parameter", "Linear", "ReLU", "GELU", "Dropout", "Embedding", "LayerNorm", "Sequential",
           "ModuleList", "MSELoss", "CrossEntropyLoss", "functional", "init", "utils", "parallel", "tensor_parallel", "SiLU",
           "Softmax", "LogSoftmax", "Tanh", "Sigmoid", "LeakyReLU", "Identity", "Flatten", "ModuleDict",
           "ParameterList", "L1Loss",
           "SmoothL1Loss", "NLLLoss", "BCEWithLogitsLoss", "KLDivLoss", "MultiHeadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "Conv1d", "Conv2d",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "RMSNorm",
           "Threshold", "Hardtanh", "ReLU6", "ELU", "CELU", "SELU", "Hardsigmoid", "Hardswish", "Softplus", "Mish",
           "Softsign", "Tanhshrink", "LogSigmoid", "GLU", "Hardshrink", "Softshrink", "PReLU", "RReLU", "Softmin",
           "Softmax2d", "NLLLoss2d", "BCELoss", "HuberLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
           "HingeEmbeddingLoss", "MarginRankingLoss", "CosineEmbeddingLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiMarginLoss",
           "MultiLabelMarginLoss", "CosineSimilarity", "PairwiseDistance", "CTCLoss",
           "CoinFlip", "FakeQuantization", "MinMaxObserver", "MovingAverageMinMaxObserver", "Quantization",
           "Conv3d", "MaxPool1d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d",
           "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
           "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "Fold", "Unfold",
           "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "common_types", "modules",
           "Conv1D", "Conv2D", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D", "BatchNorm1D", "BatchNorm2D"]

# Paddle's spellings of the same layers (PyTorch's weight layouts agree with Paddle's for these)
Conv1D, Conv2D, MaxPool2D, AvgPool2D, AdaptiveAvgPool2D = Conv1d, Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
BatchNorm1D, BatchNorm2D = BatchNorm1d, BatchNorm2d
