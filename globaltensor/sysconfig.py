"""flow.sysconfig: OneFlow's build facts (CUDA, compile and link flags), answered for this installation."""
import os
import sysconfig as _py_sysconfig
from typing import List

from ._oneflow_internal import flags as _flags

__all__ = ["get_include", "get_lib", "get_compile_flags", "get_link_flags", "get_liboneflow_link_flags", "with_cuda",
           "get_cuda_version", "has_rpc_backend_grpc", "has_rpc_backend_local", "cmake_build_type", "with_rdma"]


def get_lib() -> str:
    """The folder holding the package and its native module (_native)."""
    return os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The folder of the C++ kernels' headers: kernels/ of a source checkout (an installed wheel ships
    none: the package folder then)."""
    kernels = os.path.join(os.path.dirname(get_lib()), "kernels")
    return kernels if os.path.isdir(kernels) else get_lib()


def get_compile_flags() -> List[str]:
    flags = [f"-I{get_include()}"]
    if with_cuda():
        flags.append("-DWITH_CUDA")
    flags.append("-D_GLIBCXX_USE_CXX11_ABI=1" if _flags.use_cxx11_abi() else "-D_GLIBCXX_USE_CXX11_ABI=0")
    return flags


def get_link_flags() -> List[str]:
    """-L and -l: for the native module (_native plus the interpreter's extension suffix)."""
    return [f"-L{get_lib()}", f"-l:_native{_py_sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"]


get_liboneflow_link_flags = get_link_flags  # one native module: OneFlow's separate liboneflow is it


def with_cuda() -> bool:
    return _flags.with_cuda()


def get_cuda_version() -> int:
    """The CUDA runtime's version as OneFlow writes it (11080 for 11.8); 0 without a GPU."""
    return _flags.cuda_version()


def has_rpc_backend_grpc() -> bool:
    return False  # processes meet over our TCP store, never OneFlow's gRPC control plane


def has_rpc_backend_local() -> bool:
    return True


def cmake_build_type() -> str:
    return "Release"  # setup.py builds with the interpreter's (optimised) flags


def with_rdma() -> bool:
    return _flags.with_rdma()
