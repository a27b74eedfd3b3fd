"""paddle.fluid: Paddle 1.x's spellings of static mode (layers, optimizer, executors, DistributeTranspiler).

`import globaltensor.paddle.fluid as fluid` turns static mode on for the programs the fluid layers
record (Paddle 1.x had no dygraph default). Everything lowers onto paddle.static: the same
programs of registered ops, the same Executor.
"""
from ..framework import CPUPlace, CUDAPlace
from ..static import (CompiledProgram, Executor, Program, Variable, append_backward, default_main_program,
                      default_startup_program, global_scope, gradients, name_scope, program_guard, scope_guard)
from ..static.io import InputSpec  # noqa: F401
from ..toplevel import ParamAttr
from . import io, layers, optimizer, transpiler  # noqa: F401
from .parallel import DistributeTranspiler, DistributeTranspilerConfig, ParallelExecutor

__all__ = ["CPUPlace", "CUDAPlace", "CompiledProgram", "Executor", "Program", "Variable", "append_backward",
           "default_main_program", "default_startup_program", "global_scope", "gradients", "name_scope",
           "program_guard", "scope_guard", "ParamAttr", "layers", "optimizer", "io", "ParallelExecutor",
           "DistributeTranspiler", "DistributeTranspilerConfig", "transpiler", "is_compiled_with_cuda", "cuda_places",
           "cpu_places", "enable_dygraph", "disable_dygraph", "in_dygraph_mode"]


def is_compiled_with_cuda():
    from ..toplevel import is_compiled_with_cuda as compiled
    return compiled()


def cpu_places(device_count=None):
    from ..static import cpu_places as places
    return places(device_count)


def cuda_places(device_ids=None):
    from ..static import cuda_places as places
    return places(device_ids)


def enable_dygraph(place=None):
    from .. import disable_static
    disable_static()


def disable_dygraph():
    from .. import enable_static
    enable_static()


def in_dygraph_mode():
    from ..static import in_static_mode
    return not in_static_mode()
