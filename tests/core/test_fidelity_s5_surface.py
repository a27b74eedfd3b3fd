"""OneFlow names and checks its own tests reach for: flow.sysconfig, empty_like's name, slice checks (issue 28)."""
import numpy as np
import pytest

import globaltensor as flow

torch = pytest.importorskip("torch")


def test_sysconfig_answers_as_oneflows():
    from globaltensor import sysconfig
    assert flow.sysconfig is sysconfig
    version = sysconfig.get_cuda_version()
    assert isinstance(version, int) and (version == 0) == (not sysconfig.with_cuda())
    flags = sysconfig.get_compile_flags()
    assert flags[0] == f"-I{sysconfig.get_include()}" and ("-DWITH_CUDA" in flags) == sysconfig.with_cuda()
    assert sysconfig.get_link_flags()[0] == f"-L{sysconfig.get_lib()}"
    assert isinstance(sysconfig.has_rpc_backend_grpc(), bool) and isinstance(sysconfig.cmake_build_type(), str)


def test_factory_names_oneflow_tests_branch_on():
    assert flow.empty_like.__name__ == "empty_like_op" and flow.new_empty.__name__ == "new_empty_op"
    x = flow.empty_like(flow.ones(2, 3))
    assert x.shape == (2, 3)


@pytest.mark.parametrize("key", [slice(1, 3, 0), slice(None, None, 0)])
def test_zero_slice_step_raises_oneflows_and_pytorchs_class(key):
    with pytest.raises(ValueError, match="step"):  # PyTorch's class
        torch.arange(8.0)[key]
    with pytest.raises(RuntimeError, match="slice step cannot be zero"):  # OneFlow's
        flow.arange(8.0)[key]
    with pytest.raises(ValueError):
        flow.arange(8.0)[key]


def test_float_slice_bound_raises_oneflows_and_pytorchs_class():
    with pytest.raises(TypeError):
        torch.arange(8.0)[0.0:2.0]
    with pytest.raises(RuntimeError, match="slice indices must be integers"):
        flow.arange(8.0)[0.0:2.0]
    with pytest.raises(TypeError):
        flow.arange(8.0)[0.0:2.0]
    assert flow.arange(8.0)[np.int64(1):5:2].tolist() == torch.arange(8.0)[1:5:2].tolist()
