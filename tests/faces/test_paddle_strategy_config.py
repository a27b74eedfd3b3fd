"""dist.Strategy, Fleet's DistributedStrategy and nn.Graph.config: fields, defaults (against real
Paddle 3.3.1 where installed) and validation."""
import pytest

import globaltensor as gt
from globaltensor.graph import GraphConfig
from globaltensor.paddle.distributed import Strategy
from globaltensor.paddle.distributed.fleet import DistributedStrategy
from globaltensor.paddle.distributed.strategy import DEFAULTS, SUB_CONFIGS


def _same(ours, theirs):
    assert set(ours) == set(theirs)
    for k, v in theirs.items():
        assert ours[k] == (pytest.approx(v) if isinstance(v, float) else v), k


def test_strategy_defaults_are_paddles():
    paddle = pytest.importorskip("paddle")
    real = paddle.distributed.Strategy()
    ours = Strategy()
    for category in SUB_CONFIGS:
        theirs = getattr(real, "_" + category).to_dict()
        mine = getattr(ours, category).to_dict()
        if category == "amp":
            assert mine.pop("use_master_weight") is True  # globaltensor's own field
        _same(mine, theirs)
    for field in DEFAULTS["base"]:
        assert getattr(ours, field) == getattr(real, field)


def test_strategy_from_dict_as_paddle_reads_it():
    paddle = pytest.importorskip("paddle")
    config = {"gradient_merge": {"enable": True, "k_steps": 4, "avg": False},
              "pipeline": {"enable": True, "schedule_mode": "FThenB", "micro_batch_size": 2},
              "sharding": {"enable": True, "stage": 2, "degree": 2}, "seed": 7}
    real, ours = paddle.distributed.Strategy(config), Strategy(config)
    for category in ("gradient_merge", "pipeline", "sharding"):
        _same(getattr(ours, category).to_dict(), getattr(real, category).to_dict())
    assert ours.seed == real.seed == 7
    assert repr(ours.gradient_merge) == repr(real.gradient_merge)


def test_strategy_attributes_and_errors():
    s = Strategy()
    s.sharding.enable, s.sharding.stage, s.sharding.degree = True, 3, 2
    s.gradient_merge.k_steps = 4
    s.recompute.enable = True
    s.amp.custom_white_list = ["matmul"]
    assert s.to_dict()["sharding"]["stage"] == 3 and s.recompute.enable and s.gradient_merge.get("k_steps") == 4
    with pytest.raises(AttributeError, match="k_step"):
        s.gradient_merge.k_step = 4
    with pytest.raises(TypeError, match="k_steps must be a int"):
        s.gradient_merge.k_steps = "4"
    with pytest.raises(TypeError, match="enable must be a bool"):
        s.pipeline.enable = 1
    with pytest.raises(ValueError, match="unknown configuration"):
        Strategy({"gradiant_merge": {}})
    with pytest.raises(ValueError, match="Expected a dictionary"):
        Strategy([1])
    assert Strategy({"amp": {"init_loss_scaling": 1024}}).amp.init_loss_scaling == 1024  # an int is a float


def test_fleet_strategy_defaults_are_paddles():
    paddle = pytest.importorskip("paddle")
    real, ours = paddle.distributed.fleet.DistributedStrategy(), DistributedStrategy()
    for switch in ("amp", "recompute", "sharding", "gradient_merge", "pipeline"):
        assert getattr(ours, switch) is getattr(real, switch) is False
        _same(getattr(ours, switch + "_configs"), getattr(real, switch + "_configs"))


def test_fleet_strategy_switches_and_configs():
    s = DistributedStrategy()
    s.gradient_merge = True
    s.gradient_merge_configs = {"k_steps": 4}
    assert s.gradient_merge and s.gradient_merge_configs == {"k_steps": 4, "avg": True}
    s.recompute, s.recompute_configs = True, {"checkpoints": ["fc1"]}
    s.pipeline_configs = {"schedule_mode": "FThenB", "accumulate_steps": 4}
    assert s.pipeline_configs["micro_batch_size"] == 1 and s.pipeline_configs["schedule_mode"] == "FThenB"
    with pytest.raises(ValueError, match="bogus"):
        s.gradient_merge_configs = {"bogus": 1}
    with pytest.raises(TypeError, match="k_steps"):
        s.gradient_merge_configs = {"k_steps": "a"}
    with pytest.raises(TypeError, match="must be a bool"):
        s.sharding = "yes"
    for refused in ("tensor_parallel", "lars", "lamb", "dgc", "localsgd"):
        with pytest.raises(NotImplementedError, match=refused):
            setattr(s, refused, True)


def test_graph_config_is_the_graphs_own():
    class G(gt.nn.Graph):
        def __init__(self):
            super().__init__()
            self.config.set_gradient_accumulation_steps(4)
            self.config.enable_zero(True, stage=3)
            self.config.enable_amp(True, dtype=gt.bfloat16)
            self.config.allow_fuse_add_to_output(True)

        def build(self, x):
            return x

    g, other = G(), G()
    assert g.config is g.config and g.config is not other.config
    assert (g.config.gradient_accumulation_steps, g.config.zero_stage, g.config.amp_dtype) == (4, 3, gt.bfloat16)
    assert g.config.amp_enabled and g.config.zero_enabled and g.config.fuse_add_to_output
    c = GraphConfig()
    assert (c.zero_stage, c.gradient_accumulation_steps, c.amp_enabled) == (0, 1, False)
    c.enable_zero()
    assert c.zero_stage == 2  # OneFlow's default stage
    c.enable_zero(False)
    assert not c.zero_enabled
    for bad in (lambda: c.enable_zero(stage=4), lambda: c.set_gradient_accumulation_steps(0),
                lambda: c.enable_straighten_algorithm("Fast"), lambda: c.enable_amp(True, dtype=gt.float32)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        c.allow_fuse_model_update_ops("yes")
    with pytest.raises(RuntimeError, match="enable_zero"):
        c.set_zero_redundancy_optimizer_mode()
