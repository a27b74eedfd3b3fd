"""DistributedStrategy: the fields Fleet reads (collective buckets, big-model switches, a PS job's mode)."""
from ...strategy import check_value

# Paddle's a_sync_configs keys and defaults; only k_steps means something here (> 0: GEO)
_A_SYNC_DEFAULTS = {"k_steps": -1, "max_merge_var_num": 1, "send_queue_size": 16, "independent_recv_thread": False,
                    "min_send_grad_num_before_recv": 1, "thread_pool_size": 1, "send_wait_times": 1,
                    "runtime_split_send_recv": False, "launch_barrier": True, "heter_worker_device_guard": "cpu",
                    "lr_decay_steps": 10, "use_ps_gpu": 0, "use_gpu_graph": 0}

# Paddle 3.3.1's switch -> (its *_configs field, that dict's keys and defaults)
_CONFIG_DEFAULTS = {
    "amp": {"init_loss_scaling": 32768.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
            "incr_ratio": 2.0, "decr_ratio": 0.8, "use_dynamic_loss_scaling": True, "custom_white_list": [],
            "custom_black_list": [], "custom_black_varnames": [], "use_pure_fp16": False, "use_fp16_guard": True,
            "use_optimizer_fp16": False, "use_pure_bf16": False},
    "recompute": {"checkpoints": [], "enable_offload": False, "checkpoint_shape": [], "enable_tuning": False,
                  "refined_ops_patterns": []},
    "sharding": {"sharding_segment_strategy": "segment_broadcast_MB", "segment_broadcast_MB": 32.0,
                 "segment_anchors": [], "sharding_degree": 8, "mp_degree": 1, "dp_degree": 1, "hybrid_dp": False,
                 "gradient_merge_acc_step": 1, "optimize_offload": False, "pp_allreduce_in_optimize": False,
                 "pp_degree": 1, "optimize_cast": False, "_dp_as_optimizer_sharding": False, "stage": 1,
                 "enable_tuning": False, "use_calc_stream": False},
    "gradient_merge": {"k_steps": 1, "avg": True},
    "pipeline": {"micro_batch_size": 1, "accumulate_steps": 1, "schedule_mode": "1F1B", "p2p_cache_shape": True,
                 "enable_partial_send_recv": True},
}


class DistributedStrategy:
    """The fields that mean something here: fuse_grad_size_in_MB (the gradient bucket size of
    distributed_model), fuse_all_reduce_ops; in a parameter-server job a_sync (default True, as Paddle)
    and a_sync_configs["k_steps"] pick the mode: a_sync=False sync, True async, True with k_steps > 0
    GEO. The big-model switches amp, recompute, sharding, gradient_merge, pipeline and their
    *_configs are kept with Paddle's defaults (what each does: docs/big_models.md);
    tensor_parallel, lars, lamb, dgc and localsgd are refused when switched on (lay the model
    out with placements instead)."""

    _REFUSED = ("tensor_parallel", "lars", "lamb", "dgc", "localsgd")

    def __init__(self):
        fields = {"fuse_grad_size_in_MB": 32, "fuse_all_reduce_ops": True, "last_comm_group_size_MB": 1,
                  "find_unused_parameters": False, "hybrid_configs": {}, "nccl_comm_num": 1, "a_sync": True,
                  "a_sync_configs": dict(_A_SYNC_DEFAULTS)}
        for switch, defaults in _CONFIG_DEFAULTS.items():
            fields[switch] = False
            fields[switch + "_configs"] = {k: (list(v) if isinstance(v, list) else v) for k, v in defaults.items()}
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name):
        fields = self.__dict__["_fields"]
        if name in fields:
            value = fields[name]
            return dict(value) if isinstance(value, dict) else value
        if name in self._REFUSED:
            return False
        raise AttributeError(f"DistributedStrategy has no field {name!r} here")

    def __setattr__(self, name, value):
        if name in self._REFUSED and value:
            raise NotImplementedError(f"DistributedStrategy.{name} = {value!r} is not supported by globaltensor's "
                                      f"Fleet (its collective mode is data parallelism); lay the model out with "
                                      f"placements instead")
        if name == "a_sync" or name in _CONFIG_DEFAULTS:
            if not isinstance(value, bool):
                raise TypeError(f"DistributedStrategy.{name} must be a bool, got {value!r}")
        elif name == "a_sync_configs":
            value = self._a_sync_configs(value)
        elif name.endswith("_configs") and name[:-len("_configs")] in _CONFIG_DEFAULTS:
            value = self._merged_configs(name, value)
        self._fields[name] = value

    def _merged_configs(self, name, configs):
        """Paddle merges the given keys into the current configs; an unknown key or a value of
        another kind than its default is an error."""
        defaults = _CONFIG_DEFAULTS[name[:-len("_configs")]]
        if not isinstance(configs, dict):
            raise TypeError(f"DistributedStrategy.{name} must be a dict, got {type(configs).__name__}")
        unknown = sorted(set(configs) - set(defaults))
        if unknown:
            raise ValueError(f"DistributedStrategy.{name}: unknown key(s) {unknown}; known: {sorted(defaults)}")
        for key, value in configs.items():
            check_value(f"DistributedStrategy.{name}", key, value, defaults[key])
        return {**self._fields[name], **configs}

    def _a_sync_configs(self, configs):
        """Paddle merges the given keys into the current configs; unknown keys are an error."""
        if not isinstance(configs, dict):
            raise TypeError(f"DistributedStrategy.a_sync_configs must be a dict, got {type(configs).__name__}")
        unknown = sorted(set(configs) - set(_A_SYNC_DEFAULTS))
        if unknown:
            raise ValueError(f"DistributedStrategy.a_sync_configs: unknown key(s) {unknown}; known: "
                             f"{sorted(_A_SYNC_DEFAULTS)}")
        k_steps = configs.get("k_steps", -1)
        if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < -1:
            raise ValueError(f"DistributedStrategy.a_sync_configs['k_steps'] must be an int >= -1, got {k_steps!r}")
        return {**self._fields["a_sync_configs"], **configs}

    def ps_mode(self):
        """(mode, k_steps) of a parameter-server job: ("sync", 0), ("async", 0) or ("geo", k)."""
        if not self.a_sync:
            return "sync", 0
        k_steps = self.a_sync_configs["k_steps"]
        return ("geo", k_steps) if k_steps > 0 else ("async", 0)

    def __repr__(self):
        return "DistributedStrategy(" + ", ".join(f"{k}={v!r}" for k, v in sorted(self._fields.items())) + ")"
