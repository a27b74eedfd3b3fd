"""paddle.autograd.py_layer: the module path Paddle's code imports PyLayer from."""
from . import PyLayer, PyLayerContext

__all__ = ["PyLayer", "PyLayerContext"]
