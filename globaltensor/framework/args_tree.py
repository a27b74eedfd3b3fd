"""OneFlow's ArgsTree: walk or map the leaves of nested lists, tuples and dicts of arguments."""
from typing import Any, Callable

__all__ = ["ArgsTree"]


def _children(value):
    if type(value) in (list, tuple):
        return value
    if isinstance(value, dict):
        return value.values()
    return None


class ArgsTree:
    """A nest of arguments (lists, tuples, dicts; anything else is a leaf), as OneFlow's
    ArgsTree without generated names: iter_nodes() yields every node, containers before their
    children, depth first; map_leaf(fn) rebuilds the nest with fn applied to each leaf.

    Examples:
        >>> [n for n in ArgsTree([1, (2, {"a": 3})]).iter_nodes()]   # the list, 1, the tuple, 2, the dict, 3
    """

    def __init__(self, io_args: Any, gen_name: bool = False, root_prefix: str = "", root_name: str = None,
                 tensor_type: Any = None) -> None:
        if gen_name:
            raise NotImplementedError("ArgsTree(gen_name=True): named arguments (nn.Graph's) are not supported")
        self._io_args = io_args

    def gen_name(self) -> bool:
        return False

    def iter_nodes(self):
        stack = [iter([self._io_args])]
        while stack:
            node = next(stack[-1], stack)
            if node is stack:  # that level is done
                stack.pop()
                continue
            yield node
            children = _children(node)
            if children:
                stack.append(iter(children))

    def map_leaf(self, map_function: Callable) -> Any:
        def walk(value):
            if type(value) in (list, tuple):
                return type(value)(walk(v) for v in value)
            if isinstance(value, dict):
                return type(value)((k, walk(v)) for k, v in value.items())
            return map_function(value)
        return walk(self._io_args)

    def __repr__(self) -> str:
        return f"ArgsTree({self._io_args!r})"
