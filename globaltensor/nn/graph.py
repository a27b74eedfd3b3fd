"""oneflow.nn.graph: Graph, GraphConfig and GraphModule (one module's graph settings: recompute, stage)."""
from ..autograd import is_grad_enabled
from ..graph import Graph, GraphConfig
from ..utils.checkpoint import checkpoint

__all__ = ["Graph", "GraphConfig", "GraphModule"]


class GraphModule:
    """OneFlow's nn.graph.GraphModule: `module.to(nn.graph.GraphModule)` returns the module's
    own, whose settings last as long as the module.

    activation_checkpointing = True: the module's forward runs through gt.utils.checkpoint
    (use_reentrant=False) whenever gradients are on, in a graph or eagerly: its activations
    are not kept; backward runs it again, random ops replaying their draws (the same values and
    gradients as without, bit for bit). set_stage / stage_id are kept (the pipeline engine takes
    its stages from placements)."""

    def __init__(self, module):
        self._module = module
        self._activation_checkpointing = None
        self._stage_id, self._stage_placement = None, None

    @classmethod
    def of(cls, module):
        found = module.__dict__.get("_gt_graph_module")
        if found is None:
            found = module.__dict__["_gt_graph_module"] = cls(module)
        return found

    @property
    def activation_checkpointing(self):
        return self._activation_checkpointing

    @activation_checkpointing.setter
    def activation_checkpointing(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"GraphModule.activation_checkpointing must be a bool, got {mode!r}")
        self._activation_checkpointing = mode
        set_recompute(self._module, mode)

    def set_stage(self, stage_id=None, placement=None):
        self._stage_id, self._stage_placement = stage_id, placement

    @property
    def stage_id(self):
        return self._stage_id

    @stage_id.setter
    def stage_id(self, value):
        self._stage_id = value

    @property
    def stage_placement(self):
        return self._stage_placement

    def __repr__(self):
        return f"(MODULE:{type(self._module).__name__}():activation_checkpointing={self._activation_checkpointing})"


def set_recompute(module, mode):
    """Run `module`'s forward through checkpoint (mode True) or plainly again (False): an instance
    attribute `forward` over the class's, so the module's hooks and __call__ stay as they are."""
    module.__dict__.pop("forward", None)
    if mode:
        forward = type(module).forward.__get__(module)

        def recomputed(*args, **kwargs):
            if not is_grad_enabled():
                return forward(*args, **kwargs)
            return checkpoint(forward, *args, use_reentrant=False, **kwargs)

        module.__dict__["forward"] = recomputed
