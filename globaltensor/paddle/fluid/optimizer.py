"""fluid.optimizer: 1.x's optimizer names and keywords (parameter_list=, regularization=) on Paddle's optimizers."""
from .. import optimizer as _optimizer

__all__ = ["SGD", "Adam", "Momentum", "AdamW", "SGDOptimizer", "AdamOptimizer", "MomentumOptimizer"]


def _decay(regularization):
    """An L2Decay regularizer (its coeff) or a float, as Paddle 2.x's weight_decay."""
    if regularization is None or isinstance(regularization, (int, float)):
        return regularization
    coeff = getattr(regularization, "coeff", getattr(regularization, "_regularization_coeff", None))
    if coeff is None:
        raise TypeError(f"regularization: an L2Decay or a float, got {type(regularization).__name__}")
    return float(coeff)


class SGD(_optimizer.SGD):
    def __init__(self, learning_rate, parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, _decay(regularization), grad_clip, name)


class Momentum(_optimizer.Momentum):
    def __init__(self, learning_rate, momentum, parameter_list=None, use_nesterov=False, regularization=None,
                 grad_clip=None, name=None):
        super().__init__(learning_rate, momentum, parameter_list, use_nesterov, _decay(regularization), grad_clip, name)


class Adam(_optimizer.Adam):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameter_list=None,
                 regularization=None, grad_clip=None, name=None, lazy_mode=False):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, _decay(regularization), grad_clip, name,
                         lazy_mode)


class AdamW(_optimizer.AdamW):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameter_list=None,
                 weight_decay=0.01, grad_clip=None, name=None, lazy_mode=False):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, weight_decay, grad_clip, name, lazy_mode)


SGDOptimizer, AdamOptimizer, MomentumOptimizer = SGD, Adam, Momentum
