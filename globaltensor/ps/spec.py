"""A parameter-server job as plain data (JobSpec: servers, trainers, mode, the servers' rule, dense and sparse tables)."""
from dataclasses import dataclass

RULE_KINDS = ("sgd", "momentum", "adagrad", "adam")
RULE_PARAMS = {  # the parameters each rule reads, with Paddle's defaults
    "sgd": {"weight_decay": 0.0},
    "momentum": {"momentum": 0.9, "use_nesterov": False, "weight_decay": 0.0},
    "adagrad": {"epsilon": 1e-6, "initial_accumulator": 0.0, "weight_decay": 0.0},
    "adam": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "weight_decay": 0.0},
}
MODES = ("sync", "async", "geo")
SPLIT_METHODS = ("RoundRobin", "HashName")
DTYPES = ("float32", "float64")
INITS = {"uniform": 2, "normal": 2, "constant": 1}  # kind -> number of numbers after it
ENTRIES = {"none": 0, "probability": 1, "count_filter": 1, "show_click": 2}


@dataclass(frozen=True)
class Rule:
    """The optimizer the servers run: kind, learning rate, sorted (key, value) parameters."""
    kind: str
    lr: float
    params: tuple = ()

    @classmethod
    def make(cls, kind, lr, **params):
        return cls(kind, float(lr), tuple(sorted(params.items())))

    def param(self, key):
        """The value of one parameter, Paddle's default when the rule does not set it."""
        return dict(self.params).get(key, RULE_PARAMS[self.kind][key])

    def validate(self):
        if self.kind not in RULE_KINDS:
            raise ValueError(f"Rule.kind {self.kind!r}: must be one of {RULE_KINDS}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not self.lr >= 0:
            raise ValueError(f"Rule.lr {self.lr!r}: must be a number >= 0")
        unknown = sorted(set(dict(self.params)) - set(RULE_PARAMS[self.kind]))
        if unknown:
            raise ValueError(f"Rule {self.kind!r} has no parameters {unknown}; it reads {sorted(RULE_PARAMS[self.kind])}")


@dataclass(frozen=True)
class DenseSpec:
    """A dense parameter the servers hold in row blocks."""
    name: str
    shape: tuple
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))


@dataclass(frozen=True)
class SparseSpec:
    """A sparse table: rows of `dim` numbers keyed by int64 ids, created on first sight."""
    name: str
    dim: int
    init: tuple = ("uniform", -0.05, 0.05)
    seed: int = 0
    entry: tuple = ("none",)
    padding_idx: "int | None" = None
    dtype: str = "float32"


@dataclass(frozen=True)
class JobSpec:
    """The whole job: every process builds the same one and checks it before any traffic."""
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

    def __post_init__(self):
        for field in ("servers", "dense", "sparse"):
            object.__setattr__(self, field, tuple(getattr(self, field)))

    def validate(self):
        """Raise ValueError naming the first bad field; returns self."""
        _check_servers(self.servers)
        _check_int(self.trainers, "JobSpec.trainers", 1)
        if self.mode not in MODES:
            raise ValueError(f"JobSpec.mode {self.mode!r}: must be one of {MODES}")
        if not isinstance(self.rule, Rule):
            raise ValueError(f"JobSpec.rule must be a Rule, got {type(self.rule).__name__}")
        self.rule.validate()
        _check_int(self.k_steps, "JobSpec.k_steps", 1 if self.mode == "geo" else 0)
        _check_int(self.min_block_size, "JobSpec.min_block_size", 1)
        if self.split_method not in SPLIT_METHODS:
            raise ValueError(f"JobSpec.split_method {self.split_method!r}: must be one of {SPLIT_METHODS}")
        if not isinstance(self.secret, bytes):
            raise ValueError(f"JobSpec.secret must be bytes, got {type(self.secret).__name__}")
        for field in ("timeout", "dead_after"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"JobSpec.{field} {value!r}: must be a number of seconds > 0")
        names = [d.name for d in self.dense] + [s.name for s in self.sparse]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"JobSpec: table names {repeated} appear more than once (dense and sparse share one namespace)")
        for d in self.dense:
            _check_dense(d)
        for s in self.sparse:
            _check_sparse(s)
        return self


def _check_int(value, what, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{what} {value!r}: must be an int >= {low}")


def _check_servers(servers):
    if not servers:
        raise ValueError("JobSpec.servers is empty: a parameter-server job needs at least one server endpoint")
    for i, endpoint in enumerate(servers):
        host, _, port = str(endpoint).rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"JobSpec.servers[{i}] {endpoint!r}: must be 'ip:port' with a port in 1..65535")
    if len(set(servers)) != len(servers):
        raise ValueError(f"JobSpec.servers {list(servers)}: an endpoint appears more than once")


def _check_dense(d):
    if not isinstance(d, DenseSpec):
        raise ValueError(f"JobSpec.dense holds {type(d).__name__}, not DenseSpec")
    if not d.shape or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in d.shape):
        raise ValueError(f"DenseSpec {d.name!r}: shape {d.shape} must be positive ints (at least one dim)")
    if d.dtype not in DTYPES:
        raise ValueError(f"DenseSpec {d.name!r}: dtype {d.dtype!r} must be one of {DTYPES}")


def _check_sparse(s):
    if not isinstance(s, SparseSpec):
        raise ValueError(f"JobSpec.sparse holds {type(s).__name__}, not SparseSpec")
    _check_int(s.dim, f"SparseSpec {s.name!r}: dim", 1)
    _check_int(s.seed, f"SparseSpec {s.name!r}: seed", -(1 << 63))
    if s.dtype not in DTYPES:
        raise ValueError(f"SparseSpec {s.name!r}: dtype {s.dtype!r} must be one of {DTYPES}")
    if not s.init or s.init[0] not in INITS or len(s.init) != 1 + INITS[s.init[0]]:
        raise ValueError(f"SparseSpec {s.name!r}: init {s.init!r} must be ('uniform', lo, hi), ('normal', mean, std) "
                         "or ('constant', v)")
    if s.init[0] == "uniform" and not s.init[1] <= s.init[2]:
        raise ValueError(f"SparseSpec {s.name!r}: uniform init needs lo <= hi, got {s.init!r}")
    if s.init[0] == "normal" and not s.init[2] >= 0:
        raise ValueError(f"SparseSpec {s.name!r}: normal init needs std >= 0, got {s.init!r}")
    if not s.entry or s.entry[0] not in ENTRIES or len(s.entry) != 1 + ENTRIES[s.entry[0]]:
        raise ValueError(f"SparseSpec {s.name!r}: entry {s.entry!r} must be ('none',), ('probability', p), "
                         "('count_filter', n) or ('show_click', show_name, click_name)")
    if s.entry[0] == "probability" and not 0 < s.entry[1] <= 1:
        raise ValueError(f"SparseSpec {s.name!r}: probability entry needs 0 < p <= 1, got {s.entry[1]!r}")
    if s.entry[0] == "count_filter":
        _check_int(s.entry[1], f"SparseSpec {s.name!r}: count_filter", 0)
    if s.padding_idx is not None:
        _check_int(s.padding_idx, f"SparseSpec {s.name!r}: padding_idx", -(1 << 63))
