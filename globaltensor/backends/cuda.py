"""CUDA devices through the driver API (ctypes; no toolkit needed): is a GPU here, how many,
which one a rank uses, and has a stream finished its work."""
import ctypes
import glob
import os
import sys

_SUCCESS, _NOT_READY = 0, 600
_state = {}  # "driver": the loaded libcuda or None, "why": the reason when there is no device


def _driver():
    """libcuda, initialised once; None (and a reason in _state) when this process has no GPU."""
    if "driver" not in _state:
        _state["driver"], _state["why"] = None, None
        try:
            lib = ctypes.CDLL(os.environ.get("GLOBALTENSOR_CUDA_DRIVER", "libcuda.so.1"))
        except OSError:
            _state["why"] = "no NVIDIA driver (libcuda.so.1) was found on this machine"
            return None
        code = lib.cuInit(0)
        count = ctypes.c_int(0)
        if code != _SUCCESS:
            _state["why"] = f"the NVIDIA driver did not start (cuInit: {error_name(lib, code)})"
        elif lib.cuDeviceGetCount(ctypes.byref(count)) != _SUCCESS or count.value == 0:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            _state["why"] = "the driver sees no GPU" + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible else "")
        else:
            _state["driver"], _state["count"] = lib, count.value
    return _state["driver"]


def find_library(env_var, wheel_dirs, pattern, default):
    """$env_var, else the first file matching `pattern` in one of `wheel_dirs` (path parts of an
    nvidia-* wheel) under an entry of sys.path, else `default` (for the loader's search path)."""
    if os.environ.get(env_var):
        return os.environ[env_var]
    for base in sys.path:
        for parts in wheel_dirs:
            found = sorted(glob.glob(os.path.join(base or ".", *parts, pattern)))
            if found:
                return found[0]
    return default


def error_name(lib, code):
    name = ctypes.c_char_p()
    lib.cuGetErrorName(ctypes.c_int(code), ctypes.byref(name))
    return f"{name.value.decode() if name.value else 'error'} ({code})"


def device_count():
    """GPUs this process may use (0 without a driver or a device)."""
    return _state["count"] if _driver() is not None else 0


def is_available():
    return device_count() > 0


def require(what):
    """Raise RuntimeError saying why `what` cannot run here, unless a GPU is present."""
    if _driver() is None:
        raise RuntimeError(f"{what} needs a CUDA GPU, but {_state['why']}; use placement type \"cpu\"")


def local_device():
    """This rank's GPU: LOCAL_RANK modulo the GPUs it sees (CUDA_VISIBLE_DEVICES applies first)."""
    require("choosing a GPU")
    return int(os.environ.get("LOCAL_RANK", "0")) % device_count()


def stream_done(stream):
    """Whether all work queued on `stream` (a cudaStream_t as an int; 0 is the default stream)
    has finished; raises RuntimeError on a CUDA error."""
    lib = _driver()
    require("querying a CUDA stream")
    code = lib.cuStreamQuery(ctypes.c_void_p(stream))
    if code == _SUCCESS:
        return True
    if code == _NOT_READY:
        return False
    raise RuntimeError(f"CUDA stream {stream:#x}: {error_name(lib, code)}")
