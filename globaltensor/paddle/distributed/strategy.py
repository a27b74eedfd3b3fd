"""dist.Strategy: Paddle's to_static configuration, its sub-configs and their defaults as data."""
import copy

# Paddle 3.3.1's defaults (python/paddle/distributed/auto_parallel/constants.py), per category;
# "use_master_weight" is globaltensor's (float32 master weights under O2, Paddle's decorate default).
DEFAULTS = {
    "base": {"auto_mode": "semi", "gradient_scale": True, "gradient_scale_using_allreduce_avg": False,
             "use_cache": True, "return_numpy": True, "all_ranks": False, "split_data": True, "seed": None,
             "reinit": False},
    "recompute": {"enable": False, "checkpoints": [], "no_recompute_segments": [], "sr": 0,
                  "refined_ops_patterns": [], "enable_tuning": False},
    "amp": {"enable": False, "dtype": "float16", "level": "o1", "init_loss_scaling": 32768.0,
            "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2, "incr_ratio": 2.0, "decr_ratio": 0.8,
            "use_dynamic_loss_scaling": True, "custom_white_list": [], "custom_black_list": [],
            "custom_black_varnames": [], "use_fp16_guard": False, "use_bf16_guard": False, "use_master_grad": False,
            "use_promote": True, "use_master_weight": True},
    "sharding": {"enable": False, "stage": 1, "degree": 8, "enable_overlap": False, "param_comm_stream_num": 1,
                 "grad_comm_stream_num": 1, "param_bucket_size_numel": 1, "grad_bucket_size_numel": 1,
                 "enable_hierarchical_comm": False, "partition_algor": "greedy_even", "enable_tuning": False,
                 "tuning_range": [], "release_gradients": False, "comm_buffer_size_MB": 256,
                 "enable_tensor_fusion": False, "save_unbalanced_param": True},
    "gradient_merge": {"enable": False, "k_steps": 1, "avg": True},
    "pipeline": {"enable": False, "schedule_mode": "1F1B", "pp_degree": 1, "vpp_degree": 1, "vpp_seg_method": "",
                 "micro_batch_size": 1, "accumulate_steps": 1, "generation_batch_size": 1,
                 "enable_send_recv_overlap": False, "job_schedule_profiler_start": -1,
                 "job_schedule_profiler_stop": -1, "program_runtimes": [61, 72, 71, 34, 3], "memory_limit_times": -1,
                 "split_backward": False, "auto_parallel_sync_shared_params": False},
}

SUB_CONFIGS = ("recompute", "amp", "sharding", "gradient_merge", "pipeline")
# Paddle's categories that change nothing here (compiler passes), accepted in a config dict
_ACCEPTED = {"full_graph", "fused_passes", "mp_optimization", "dp_optimization", "sp_optimization"}


def check_value(owner, field, value, default):
    """A field's value must have its default's kind (an int is a float; None defaults take anything)."""
    if default is None:
        return value
    kind = type(default)
    ok = isinstance(value, bool) if kind is bool else (
        isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
        isinstance(value, int) and not isinstance(value, bool) if kind is int else isinstance(value, kind))
    if not ok:
        raise TypeError(f"{owner}.{field} must be a {kind.__name__} (as its default {default!r}), got {value!r}")
    return value


class SubConfig:
    """One category of a Strategy (strategy.amp, .sharding, ...): its fields as attributes with
    Paddle's defaults; an unknown field or a value of another kind raises."""

    def __init__(self, category, config_dict=None):
        object.__setattr__(self, "_category", category)
        for field, default in DEFAULTS[category].items():
            object.__setattr__(self, field, copy.deepcopy(default))
        if config_dict is not None:
            self.from_dict(config_dict)

    def __setattr__(self, field, value):
        defaults = DEFAULTS[self._category]
        if field not in defaults:
            raise AttributeError(f"Strategy.{self._category} has no field {field!r}; its fields: {sorted(defaults)}")
        object.__setattr__(self, field, check_value(f"Strategy.{self._category}", field, value, defaults[field]))

    def from_dict(self, config_dict):
        if not isinstance(config_dict, dict):
            raise ValueError(f"Expected a dictionary. But received: {config_dict!r}")
        for field, value in config_dict.items():
            setattr(self, field, value)

    def to_dict(self):
        return {field: getattr(self, field) for field in DEFAULTS[self._category]}

    def get(self, field, default=None):
        return self.to_dict().get(field, default)

    def __repr__(self):
        return "{" + "".join(f'"{k}":"{v}",' for k, v in self.to_dict().items()) + "}"


class Strategy:
    """dist.Strategy(config=None): the sub-configs recompute, amp, sharding, gradient_merge and
    pipeline (Paddle 3.3.1's fields and defaults), and the base fields (auto_mode, seed, ...).
    config is a dict {category: {field: value}} plus base fields, as Paddle reads it. What each
    sub-config does in dist.to_static: docs/big_models.md."""

    def __init__(self, config=None):
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"Expected a dictionary. But received: {config!r}")
        self._config_dict = copy.deepcopy(config or {})
        unknown = sorted(set(self._config_dict) - set(DEFAULTS) - set(DEFAULTS["base"]) - _ACCEPTED)
        if unknown:
            raise ValueError(f"dist.Strategy: unknown configuration(s) {unknown}; known: "
                             f"{sorted(set(DEFAULTS) - {'base'}) + sorted(DEFAULTS['base'])}")
        for field, default in DEFAULTS["base"].items():
            value = self._config_dict.get(field, copy.deepcopy(default))
            object.__setattr__(self, field, check_value("Strategy", field, value, default))
        for category in SUB_CONFIGS:
            object.__setattr__(self, "_" + category, SubConfig(category, self._config_dict.get(category)))
        self._full_graph = self._config_dict.get("full_graph", True)

    def __setattr__(self, field, value):
        if field in DEFAULTS["base"]:
            value = check_value("Strategy", field, value, DEFAULTS["base"][field])
        elif not field.startswith("_"):
            raise AttributeError(f"dist.Strategy has no field {field!r} (set the sub-configs' fields, e.g. "
                                 f"strategy.gradient_merge.k_steps)")
        object.__setattr__(self, field, value)

    recompute = property(lambda self: self._recompute, doc="enable: activation recompute of the layer's blocks")
    amp = property(lambda self: self._amp, doc="enable, dtype, level (o1/o2), loss scaling, white/black lists")
    sharding = property(lambda self: self._sharding, doc="enable, stage (1-3), degree: ZeRO over the dp axis")
    gradient_merge = property(lambda self: self._gradient_merge, doc="enable, k_steps, avg: one update per k")
    pipeline = property(lambda self: self._pipeline,
                        doc="enable, schedule_mode (1F1B, FThenB), micro_batch_size, accumulate_steps")

    @property
    def full_graph(self):
        return self._full_graph

    @property
    def config(self):
        """The dict the Strategy was built from (kept for code that read it before)."""
        return self._config_dict

    def to_dict(self):
        out = {field: getattr(self, field) for field in DEFAULTS["base"]}
        out.update({category: getattr(self, category).to_dict() for category in SUB_CONFIGS})
        return out

    def get(self, field, default=None):
        return self.to_dict().get(field, default)

    def __repr__(self):
        return f"Strategy({self.to_dict()!r})"


__all__ = ["DEFAULTS", "Strategy", "SubConfig"]
