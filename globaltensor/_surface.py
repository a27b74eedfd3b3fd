"""globaltensor's top-level names: the package's __init__ takes them (at import; in a launcher, on first use)."""
import sys as _sys
import types as _types

from . import distributed, env  # first: loading distributed gives the device backend its collectives
from . import autograd, debug, sbp
from . import comm, nn, optim, pipeline, utils, jit  # noqa: E402 - after the ops they build on
from . import amp
from .amp import autocast
from .serialization import load, save
from .memory import empty_cache, max_memory_allocated, memory_allocated, memory_stats, reset_peak_memory_stats
from . import ops as _ops
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .dtype import (bfloat16, bool, complex64, complex128, float16, float32, float64, get_default_dtype, int8,  # noqa: A004
                    int32, int64, set_default_dtype, uint8)
from .ops import (arange, empty, empty_like, eye, full, full_like, linspace, normal, ones, ones_like, rand,  # noqa: E402
                  randint, randn, uniform, zeros, zeros_like)
from .creation import tensor
from .printing import is_tensor, set_printoptions
from .placement import placement
from .generator import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .ops.reduction import return_types
from .tensor import Size, device
from .tensor_types import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor,
                           IntTensor, LongTensor, Tensor, from_numpy)
from .data_parallel import DataParallel as _DataParallel, no_sync as _no_sync, set_bucket_size as _set_bucket_size

distributed.DataParallel, distributed.no_sync, distributed.set_bucket_size = _DataParallel, _no_sync, _set_bucket_size
from .fsdp import fully_shard as _fully_shard  # noqa: E402 - ZeRO-3 (PyTorch FSDP2's face), L9 put on the L1 package
distributed.fully_shard = _fully_shard
from . import fsdp_api as _fsdp_api  # noqa: E402 - torch.distributed.fsdp's names: globaltensor.distributed.fsdp
distributed.fsdp = _types.ModuleType("globaltensor.distributed.fsdp", "torch.distributed.fsdp's names (fully_shard's).")
for _name in ("FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy", "UnshardHandle"):
    setattr(distributed.fsdp, _name, getattr(_fsdp_api, _name))
distributed.fsdp.fully_shard = _fully_shard
_sys.modules.setdefault("globaltensor.distributed.fsdp", distributed.fsdp)
env.barrier = distributed.job_barrier  # SPEC's gt.env.barrier(); env itself imports nothing of the project

__version__ = "0.1.0"


for _name in _ops.PUBLIC + _ops.EVERYDAY + list(_ops.ONEFLOW_ONLY):
    globals()[_name] = getattr(_ops, _name)
for _name in utils.global_view.SOURCES:  # under flow.utils.global_view.global_mode they make global tensors
    globals()[_name] = utils.global_view.sourced(globals()[_name])
from . import linalg  # noqa: E402 - torch.linalg's names
nn.functional.normalize = _ops.normalize  # noqa: E402 - written with the ops (nn/ is another's file)
for _name in ("mish", "silu", "selu", "softplus", "softshrink", "softsign"):  # OneFlow has these at top level too
    globals()[_name] = getattr(nn.functional, _name)
from . import _C  # noqa: E402 - flow._C, OneFlow's functional namespace (the C++ extension is _native)
broadcast_like = _C.broadcast_like  # OneFlow's flow.broadcast_like

# `from globaltensor import *` gives what `import torch` users reach for: the modules, the types,
# the factories and every op (PyTorch's `max`, `sum`, `bool` ... among them, as torch's __all__),
# except Paddle's `slice`, which would hide Python's builtin slice.
__all__ = [
    "amp", "autocast", "autograd", "comm", "debug", "distributed", "env", "jit", "nn", "optim", "utils", "sbp", "placement", "Tensor", "tensor",
    "device", "Size", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
    "CharTensor", "ByteTensor", "BoolTensor", "double", "half", "long", "char",
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "bool", "int8", "uint8", "complex64", "complex128",
    "cfloat", "cdouble", "get_default_dtype", "set_default_dtype",
    "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand", "randn", "randint", "normal", "uniform",
    "zeros_like", "ones_like", "full_like", "empty_like", "from_numpy",
    "save", "load", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "return_types",
    "manual_seed", "initial_seed", "get_rng_state", "set_rng_state", "seed", "Generator", "default_generator",
    "__version__",
    "memory_stats", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "empty_cache",
] + [_name for _name in _ops.PUBLIC + _ops.EVERYDAY if _name != "slice"] + ["linalg"]

if env.get_world_size() > 1:  # a rank of a job: numpy's large arrays live in shared memory from the start
    distributed.world.world()  # what this installs, and how exit undoes it: docs/architecture.md, "What a job installs"

# PyTorch's and OneFlow's dtype aliases, here only (no module of ours shadows a builtin); `float` and
# `int` stay out of __all__, so `from globaltensor import *` leaves the builtins alone.
float, double, half = float32, float64, float16  # noqa: A001
long, int, char = int64, int32, int8  # noqa: A001
cfloat, cdouble = complex64, complex128
