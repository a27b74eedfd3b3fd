"""A parameter-server job as plain data: the optimizer rule, the dense and sparse tables, the endpoints and modes."""
from __future__ import annotations

from dataclasses import dataclass

MODES = ("sync", "async", "geo")
RULE_KINDS = ("sgd", "momentum", "adagrad", "adam")
SPLIT_METHODS = ("RoundRobin", "HashName")


@dataclass(frozen=True)
class Rule:
    """The optimizer the servers run; params are sorted (key, value) pairs (beta1, epsilon, momentum, ...)."""
    kind: str
    lr: float
    params: tuple = ()


@dataclass(frozen=True)
class DenseSpec:
    name: str
    shape: tuple
    dtype: str = "float32"


@dataclass(frozen=True)
class SparseSpec:
    name: str
    dim: int
    init: tuple = ("uniform", -0.05, 0.05)
    seed: int = 0
    entry: tuple = ("none",)
    padding_idx: int | None = None
    dtype: str = "float32"


@dataclass(frozen=True)
class JobSpec:
    servers: tuple
    trainers: int
    mode: str
    rule: Rule
    dense: tuple = ()
    sparse: tuple = ()
    k_steps: int = 0
    min_block_size: int = 8192
    slice_var_up: bool = True
    split_method: str = "RoundRobin"
    secret: bytes = b""
    timeout: float = 60.0
    dead_after: float = 5.0

    def validate(self) -> None:
        """Raise ValueError naming the field for anything a server or trainer could not run with."""
        if not self.servers:
            raise ValueError("JobSpec.servers is empty: give at least one 'ip:port' endpoint")
        for ep in self.servers:
            host, _, port = str(ep).rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"JobSpec.servers: {ep!r} is not an 'ip:port' endpoint")
        if len(set(self.servers)) != len(self.servers):
            raise ValueError(f"JobSpec.servers lists an endpoint twice: {self.servers}")
        if not isinstance(self.trainers, int) or self.trainers < 1:
            raise ValueError(f"JobSpec.trainers must be a positive int, got {self.trainers!r}")
        if self.mode not in MODES:
            raise ValueError(f"JobSpec.mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "geo" and self.k_steps < 1:
            raise ValueError(f"JobSpec.k_steps must be >= 1 in geo mode, got {self.k_steps}")
        if self.rule.kind not in RULE_KINDS:
            raise ValueError(f"Rule.kind must be one of {RULE_KINDS}, got {self.rule.kind!r}")
        if self.split_method not in SPLIT_METHODS:
            raise ValueError(f"JobSpec.split_method must be one of {SPLIT_METHODS}, got {self.split_method!r}")
        names = [d.name for d in self.dense] + [s.name for s in self.sparse]
        if len(set(names)) != len(names):
            raise ValueError(f"JobSpec: a table name appears twice in {names}")
        if self.timeout <= 0 or self.dead_after <= 0:
            raise ValueError(f"JobSpec.timeout and dead_after must be > 0, got {self.timeout}, {self.dead_after}")
