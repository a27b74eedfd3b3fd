"""paddle.nn.loss: Paddle's loss layers, each paddle.nn.functional's loss with the arguments it was made with."""
from . import functional as _F
from .layer import Layer, bind_arguments

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CTCLoss", "CosineEmbeddingLoss", "CrossEntropyLoss", "GaussianNLLLoss",
           "HingeEmbeddingLoss", "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss", "MultiLabelMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "NLLLoss", "PoissonNLLLoss", "SmoothL1Loss",
           "SoftMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss"]


def _loss(name, fn, params):
    """A Layer class whose forward(*inputs) is fn(*inputs, **its arguments), Paddle's parameters
    `params` ((name, default) pairs in Paddle's order; `name=` is accepted and unused)."""
    params = tuple(params)

    def __init__(self, *args, name=None, **kwargs):
        Layer.__init__(self)
        self._args = bind_arguments(self, params, args, kwargs)
        if self._args.get("reduction", "mean") not in ("mean", "sum", "none", "batchmean"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or 'none', got "
                             f"{self._args['reduction']!r}")

    def forward(self, *inputs, **kwargs):
        return fn(*inputs, **kwargs, **self._args)

    return type(name, (Layer,), {"__init__": __init__, "forward": forward,
                                 "__doc__": f"paddle.nn.{name}: paddle.nn.functional.{fn.__name__} as a layer",
                                 "__module__": "globaltensor.paddle.nn"})


_R = ("reduction", "mean")
BCELoss = _loss("BCELoss", _F.binary_cross_entropy, [("weight", None), _R])
BCEWithLogitsLoss = _loss("BCEWithLogitsLoss", _F.binary_cross_entropy_with_logits,
                          [("weight", None), _R, ("pos_weight", None)])
CTCLoss = _loss("CTCLoss", _F.ctc_loss, [("blank", 0), _R, ("zero_infinity", False)])
CosineEmbeddingLoss = _loss("CosineEmbeddingLoss", _F.cosine_embedding_loss, [("margin", 0), _R])
CrossEntropyLoss = _loss("CrossEntropyLoss", _F.cross_entropy,
                         [("weight", None), ("ignore_index", -100), _R, ("soft_label", False), ("axis", -1),
                          ("use_softmax", True), ("label_smoothing", 0.0)])
GaussianNLLLoss = _loss("GaussianNLLLoss", _F.gaussian_nll_loss, [("full", False), ("epsilon", 1e-06), _R])
HingeEmbeddingLoss = _loss("HingeEmbeddingLoss", _F.hinge_embedding_loss, [("margin", 1.0), _R])
KLDivLoss = _loss("KLDivLoss", _F.kl_div, [_R, ("log_target", False)])
L1Loss = _loss("L1Loss", _F.l1_loss, [_R])
MSELoss = _loss("MSELoss", _F.mse_loss, [_R])
MarginRankingLoss = _loss("MarginRankingLoss", _F.margin_ranking_loss, [("margin", 0.0), _R])
MultiLabelMarginLoss = _loss("MultiLabelMarginLoss", _F.multi_label_margin_loss, [_R])
MultiLabelSoftMarginLoss = _loss("MultiLabelSoftMarginLoss", _F.multi_label_soft_margin_loss, [("weight", None), _R])
MultiMarginLoss = _loss("MultiMarginLoss", _F.multi_margin_loss, [("p", 1), ("margin", 1.0), ("weight", None), _R])
NLLLoss = _loss("NLLLoss", _F.nll_loss, [("weight", None), ("ignore_index", -100), _R])
PoissonNLLLoss = _loss("PoissonNLLLoss", _F.poisson_nll_loss,
                       [("log_input", True), ("full", False), ("epsilon", 1e-08), _R])
SmoothL1Loss = _loss("SmoothL1Loss", _F.smooth_l1_loss, [_R, ("delta", 1.0), ("is_huber", True)])
SoftMarginLoss = _loss("SoftMarginLoss", _F.soft_margin_loss, [_R])
TripletMarginLoss = _loss("TripletMarginLoss", _F.triplet_margin_loss,
                          [("margin", 1.0), ("p", 2.0), ("epsilon", 1e-06), ("swap", False), _R])
TripletMarginWithDistanceLoss = _loss("TripletMarginWithDistanceLoss", _F.triplet_margin_with_distance_loss,
                                      [("distance_function", None), ("margin", 1.0), ("swap", False), _R])
