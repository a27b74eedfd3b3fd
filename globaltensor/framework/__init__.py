"""flow.framework as OneFlow's tests reach it: args_tree.ArgsTree, balanced_splitter, session_context."""
from . import args_tree, balanced_splitter, session_context

__all__ = ["args_tree", "balanced_splitter", "session_context"]
