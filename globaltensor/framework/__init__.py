"""flow.framework as OneFlow's tests reach it: args_tree.ArgsTree and balanced_splitter."""
from . import args_tree, balanced_splitter

__all__ = ["args_tree", "balanced_splitter"]
