"""GraphConfig: OneFlow's nn.Graph.config, each option validated and kept as a plain attribute."""
from .. import dtype as _dtype

_STRAIGHTEN_MODES = ("Disable", "SpeedFirst", "MemoryFirst", "OverlapCpuGpu", "DelayShortGpu")
_AUTO_MEMORY_MODES = ("Disable", "SlightMemoryDown", "ModerateMemoryDown", "HeavyMemoryDown", "AdaptiveMemory")


def _bool(method, value):
    if not isinstance(value, bool):
        raise TypeError(f"GraphConfig.{method}: mode must be a bool, got {value!r}")
    return value


def _int(method, name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"GraphConfig.{method}: {name} must be an int >= {low}, got {value!r}")
    return value


def _choice(method, value, choices):
    if value not in choices:
        raise ValueError(f"GraphConfig.{method}: mode {value!r} is none of {list(choices)}")
    return value


class GraphConfig:
    """The options of one nn.Graph (Graph.config), as OneFlow spells them. The ones acted on here:
    enable_amp (amp_enabled, amp_dtype), enable_zero (zero_enabled, zero_stage, zero_shard_min_size,
    zero_shard_restore_level), set_gradient_accumulation_steps (gradient_accumulation_steps).
    The rest are accepted and kept but change nothing here (fusion, stream, memory-planning and
    auto-parallel switches of OneFlow's compiler): fuse_add_to_output, fuse_model_update_ops,
    fuse_cast_scale, cudnn_conv_heuristic_search_algo, straighten_algorithm, compress_memory,
    choose_best_memory_allocation, auto_parallel*, auto_memory, multi_tensor_update,
    fused_model_update_cast, outputs_buffer_size."""

    def __init__(self):
        self.training = False
        self.amp_enabled, self.amp_dtype = False, _dtype.float16
        self.zero_enabled, self.zero_stage = False, 0
        self.zero_shard_min_size, self.zero_shard_restore_level = 1024, 1
        self.gradient_accumulation_steps, self.gradient_accumulation_avg = 1, True
        self.outputs_buffer_size = 2
        # accepted no-ops (OneFlow compiler switches)
        self.fuse_add_to_output = self.fuse_model_update_ops = self.fuse_cast_scale = False
        self.cudnn_conv_heuristic_search_algo = True
        self.straighten_algorithm = "MemoryFirst"
        self.compress_memory = self.choose_best_memory_allocation = False
        self.auto_parallel = self.auto_parallel_ignore_user_sbp_config = False
        self.auto_parallel_computation_cost_ratio, self.auto_parallel_wait_time = 0.05, 1.65e4
        self.auto_parallel_trunk_algo, self.auto_parallel_sbp_collector = True, False
        self.auto_memory = "AdaptiveMemory"
        self.multi_tensor_update = self.fused_model_update_cast = False

    # --- acted on ---------------------------------------------------------------------------
    def enable_amp(self, mode=True, *, dtype=_dtype.float16):
        """Mixed precision for the graph's step: dtype float16 or bfloat16."""
        self.amp_enabled = _bool("enable_amp", mode)
        found = _dtype.to_dtype(dtype)
        if found not in (_dtype.float16, _dtype.bfloat16):
            raise ValueError(f"GraphConfig.enable_amp: dtype must be float16 or bfloat16, got {dtype!r}")
        self.amp_dtype = found

    def set_zero_redundancy_optimizer_mode(self, mode="distributed_split"):
        raise RuntimeError("`set_zero_redundancy_optimizer_mode` has been changed to `enable_zero`, please use "
                           "`enable_zero(True)` to activate ZeRO optimization (OneFlow's message)")

    def enable_zero(self, mode=True, *, stage=2, shard_min_size=1024, shard_restore_level=1):
        """ZeRO over the data-parallel axis: stage 1 shards optimizer state, 2 also gradients,
        3 also parameters (OneFlow's default stage is 2). mode=False switches it off."""
        if not _bool("enable_zero", mode):
            self.zero_enabled, self.zero_stage = False, 0
            return
        stage = _int("enable_zero", "stage", stage, 1)
        if stage > 3:
            raise ValueError(f"GraphConfig.enable_zero: ZeRO stage must range from 1 to 3, got {stage}")
        self.zero_shard_min_size = _int("enable_zero", "shard_min_size", shard_min_size, 1)
        self.zero_shard_restore_level = _int("enable_zero", "shard_restore_level", shard_restore_level, 0)
        self.zero_enabled, self.zero_stage = True, stage

    def set_gradient_accumulation_steps(self, value, *, avg=True):
        """Each call of a graph with an optimizer cuts its batch (dim 0 of the tensor arguments)
        into `value` micro-batches, runs build() on each, reduces the gradients once and updates
        once; avg=True (OneFlow's) divides the summed gradients by `value`. The outputs: 0-d
        tensors stacked to shape (value,), others joined along dim 0 (graph/accumulate.py)."""
        self.gradient_accumulation_steps = _int("set_gradient_accumulation_steps", "value", value, 1)
        self.gradient_accumulation_avg = _bool("set_gradient_accumulation_steps", avg)

    def set_outputs_buffer_size(self, value=2):
        """Accepted no-op here (the replay is synchronous): kept in outputs_buffer_size."""
        self.outputs_buffer_size = _int("set_outputs_buffer_size", "value", value, 1)

    # --- accepted no-ops (OneFlow compiler switches; kept, change nothing here) ---------------
    def allow_fuse_model_update_ops(self, mode=True):
        self.fuse_model_update_ops = _bool("allow_fuse_model_update_ops", mode)

    def allow_fuse_add_to_output(self, mode=True):
        self.fuse_add_to_output = _bool("allow_fuse_add_to_output", mode)

    def allow_fuse_cast_scale(self, mode=True):
        self.fuse_cast_scale = _bool("allow_fuse_cast_scale", mode)

    def enable_cudnn_conv_heuristic_search_algo(self, mode=True):
        self.cudnn_conv_heuristic_search_algo = _bool("enable_cudnn_conv_heuristic_search_algo", mode)

    def enable_straighten_algorithm(self, mode="MemoryFirst"):
        self.straighten_algorithm = _choice("enable_straighten_algorithm", mode, _STRAIGHTEN_MODES)

    def enable_compress_memory(self, mode=True):
        self.compress_memory = _bool("enable_compress_memory", mode)

    def enable_choose_best_memory_allocation(self, mode=True):
        self.choose_best_memory_allocation = _bool("enable_choose_best_memory_allocation", mode)

    def enable_auto_parallel(self, mode=True):
        self.auto_parallel = _bool("enable_auto_parallel", mode)

    def enable_auto_parallel_ignore_user_sbp_config(self, mode=True):
        self.auto_parallel_ignore_user_sbp_config = _bool("enable_auto_parallel_ignore_user_sbp_config", mode)

    def set_auto_parallel_computation_cost_ratio(self, ratio):
        self.auto_parallel_computation_cost_ratio = _number("set_auto_parallel_computation_cost_ratio", ratio)

    def set_auto_parallel_wait_time(self, cost):
        self.auto_parallel_wait_time = _number("set_auto_parallel_wait_time", cost)

    def enable_auto_parallel_trunk_algo(self, mode=True):
        self.auto_parallel_trunk_algo = _bool("enable_auto_parallel_trunk_algo", mode)

    def enable_auto_parallel_sbp_collector(self, mode=True):
        self.auto_parallel_sbp_collector = _bool("enable_auto_parallel_sbp_collector", mode)

    def enable_auto_memory(self, mode="AdaptiveMemory"):
        self.auto_memory = _choice("enable_auto_memory", mode, _AUTO_MEMORY_MODES)

    def enable_multi_tensor_update(self, mode=True):
        self.multi_tensor_update = _bool("enable_multi_tensor_update", mode)

    def enable_fused_model_update_cast(self, mode=True):
        self.fused_model_update_cast = _bool("enable_fused_model_update_cast", mode)

    def __repr__(self):
        return (f"(CONFIG:config:GraphConfig(training={self.training}, amp={self.amp_enabled}, "
                f"zero_stage={self.zero_stage}, gradient_accumulation_steps={self.gradient_accumulation_steps}))")


def _number(method, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"GraphConfig.{method}: expected a number >= 0, got {value!r}")
    return float(value)


__all__ = ["GraphConfig"]
