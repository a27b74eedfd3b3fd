"""paddle.nn.Layer: gt's Module with Paddle's method names and its rule for dense parameters."""
from ...autograd import seeds_ones as _seeds_ones
from ...nn.module import Module, Parameter


class Layer(Module):
    """paddle.nn.Layer: a Module with Paddle's method names as well. Assigning a distributed
    parameter (dist.shard_tensor) replicates the layer's other, dense parameters on its mesh, in
    place (Paddle's rule: a dense parameter next to distributed ones is replicated)."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if not isinstance(value, Parameter):
            return
        _seeds_ones(value)  # Paddle's rule: a non-scalar backward that reaches it seeds ones
        if value.is_global:
            from ..distributed.auto_parallel import replicate_in_place
            for p in self._parameters.values():
                if p is not None and p.is_local:
                    replicate_in_place(p, value.placement)

    def set_state_dict(self, state_dict, use_structured_name=True):
        """Copy the values in (each keeps its parameter's placement and SBP); returns the
        (missing, unexpected) keys, as Paddle."""
        return self.load_state_dict(state_dict, strict=False)

    set_dict = set_state_dict

    def clear_gradients(self, set_to_zero=True):
        self.zero_grad(set_to_none=not set_to_zero)

    def sublayers(self, include_self=False):
        found = list(self.modules())
        return found if include_self else found[1:]

    def named_sublayers(self, prefix="", include_self=False):
        found = list(self.named_modules(prefix))
        return found if include_self else found[1:]

    def add_sublayer(self, name, sublayer):
        self.add_module(name, sublayer)
        return sublayer

    def create_parameter(self, shape, attr=None, dtype=None, is_bias=False, default_initializer=None):
        """A new parameter made as Paddle makes one (see paddle.nn.parameter.create_parameter)."""
        from .parameter import create_parameter
        return create_parameter(shape, dtype, attr=attr, is_bias=is_bias, default_initializer=default_initializer)


def bind_arguments(layer, params, args, kwargs):
    """The arguments a parameterised layer was made with: Paddle's (name, default) pairs `params`, in
    Paddle's order, filled from args then kwargs; too many or unknown ones raise a TypeError."""
    names = [p for p, _ in params]
    if len(args) > len(names):
        raise TypeError(f"{type(layer).__name__} takes at most {len(names)} arguments ({', '.join(names)})")
    unknown = set(kwargs) - set(names)
    if unknown:
        raise TypeError(f"{type(layer).__name__}: unexpected arguments {sorted(unknown)}; it takes {names}")
    return {**dict(params), **dict(zip(names, args)), **kwargs}
