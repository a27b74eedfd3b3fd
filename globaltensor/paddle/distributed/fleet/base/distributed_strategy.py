"""DistributedStrategy: the fields Fleet reads (collective buckets; a parameter-server job's mode)."""

# Paddle's a_sync_configs keys and defaults; only k_steps means something here (> 0: GEO)
_A_SYNC_DEFAULTS = {"k_steps": -1, "max_merge_var_num": 1, "send_queue_size": 16, "independent_recv_thread": False,
                    "min_send_grad_num_before_recv": 1, "thread_pool_size": 1, "send_wait_times": 1,
                    "runtime_split_send_recv": False, "launch_barrier": True, "heter_worker_device_guard": "cpu",
                    "lr_decay_steps": 10, "use_ps_gpu": 0, "use_gpu_graph": 0}


class DistributedStrategy:
    """The fields that mean something here: fuse_grad_size_in_MB (the gradient bucket size of
    distributed_model), fuse_all_reduce_ops; in a parameter-server job a_sync (default True, as Paddle)
    and a_sync_configs["k_steps"] pick the mode: a_sync=False sync, True async, True with k_steps > 0
    GEO. amp, recompute, sharding, pipeline and tensor parallel configs are refused when switched on
    (use globaltensor's own layouts for those)."""

    _REFUSED = ("amp", "recompute", "sharding", "pipeline", "tensor_parallel", "gradient_merge", "lars", "lamb",
                "dgc", "localsgd")

    def __init__(self):
        object.__setattr__(self, "_fields", {"fuse_grad_size_in_MB": 32, "fuse_all_reduce_ops": True,
                                             "last_comm_group_size_MB": 1, "find_unused_parameters": False,
                                             "hybrid_configs": {}, "nccl_comm_num": 1, "a_sync": True,
                                             "a_sync_configs": dict(_A_SYNC_DEFAULTS)})

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
        if name == "a_sync":
            if not isinstance(value, bool):
                raise TypeError(f"DistributedStrategy.a_sync must be a bool, got {value!r}")
        elif name == "a_sync_configs":
            value = self._a_sync_configs(value)
        self._fields[name] = value

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
