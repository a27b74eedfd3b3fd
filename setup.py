"""Build globaltensor._native: C++ kernels always; CUDA kernels when GLOBALTENSOR_BUILD_CUDA says so."""
import glob
import os
import shutil
import subprocess
import sys

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ParallelCompile("GLOBALTENSOR_BUILD_JOBS", default=0).install()


def cuda_home():
    """The CUDA toolkit root holding bin/nvcc and include/cuda_runtime.h, else None: CUDA_HOME or
    CUDA_PATH, then where the nvcc on PATH lives, then /usr/local/cuda (an nvcc on PATH may be a
    wrapper script)."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates.append("/usr/local/cuda")
    for home in filter(None, candidates):
        if os.path.exists(os.path.join(home, "bin", "nvcc")) and \
                os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    return None


def want_cuda(cuda_sources):
    """GLOBALTENSOR_BUILD_CUDA: 1 forces the CUDA build, 0 skips it, auto (default) detects."""
    mode = os.environ.get("GLOBALTENSOR_BUILD_CUDA", "auto").lower()
    if mode in ("0", "false", "no", "off") or not cuda_sources:
        return None
    home = cuda_home()
    if mode in ("1", "true", "yes", "on") and home is None:
        raise RuntimeError("GLOBALTENSOR_BUILD_CUDA=1 but nvcc and cuda_runtime.h were not found (set CUDA_HOME)")
    return home


NEEDS_CUBLAS = {"kernels/cuda_linear.cu"}  # compiled only where cublasLt.h is found


def cublas_include(home):
    """The folder holding cublasLt.h: GLOBALTENSOR_CUBLAS_INCLUDE, the toolkit's include folder, or
    an nvidia-cublas wheel's (nvidia/cu13/include, nvidia/cublas/include) on sys.path; else None."""
    candidates = [os.environ.get("GLOBALTENSOR_CUBLAS_INCLUDE"), os.path.join(home, "include")]
    for base in sys.path:
        candidates += [os.path.join(base, "nvidia", "cu13", "include"), os.path.join(base, "nvidia", "cublas", "include")]
    return next((d for d in filter(None, candidates) if os.path.exists(os.path.join(d, "cublasLt.h"))), None)


def compile_cuda(home, sources, out_dir, include_dirs):
    """nvcc each source for sm_ARCH plus PTX (GLOBALTENSOR_CUDA_ARCH, default 90); the objects."""
    arch = os.environ.get("GLOBALTENSOR_CUDA_ARCH", "90")
    os.makedirs(out_dir, exist_ok=True)
    objects = []
    for src in sources:
        obj = os.path.join(out_dir, os.path.basename(src) + ".o")
        cmd = [os.path.join(home, "bin", "nvcc"), "-c", src, "-o", obj, "-O3", "-std=c++17",
               "--compiler-options", "-fPIC", f"-gencode=arch=compute_{arch},code=sm_{arch}",
               f"-gencode=arch=compute_{arch},code=compute_{arch}"] + [f"-I{d}" for d in include_dirs]
        print(" ".join(cmd))
        subprocess.check_call(cmd)
        objects.append(obj)
    return objects


class BuildExt(build_ext):
    """Compiles kernels/*.cu with nvcc (when wanted) and links the objects into _native, with the
    CUDA runtime linked statically: importing _native never needs libcudart, and libcuda is opened
    only by the first CUDA call."""

    def build_extension(self, ext):
        cuda_sources = sorted(glob.glob("kernels/*.cu"))
        home = want_cuda(cuda_sources)
        cublas = cublas_include(home) if home else None
        if home and cublas is None:
            print("note: cublasLt.h not found; building CUDA without cuBLASLt (set GLOBALTENSOR_CUBLAS_INCLUDE)")
            cuda_sources = [s for s in cuda_sources if s not in NEEDS_CUBLAS]
        if home:
            try:
                ext.extra_objects += compile_cuda(home, cuda_sources, os.path.join(self.build_temp, "cuda"),
                                                  [cublas] if cublas else [])
            except subprocess.CalledProcessError:
                if os.environ.get("GLOBALTENSOR_BUILD_CUDA", "auto").lower() != "auto":
                    raise
                print("warning: nvcc failed; building without CUDA (GLOBALTENSOR_BUILD_CUDA=1 makes this an error)")
                home = None
        if home:
            ext.define_macros.append(("GLOBALTENSOR_WITH_CUDA", "1"))
            if cublas:
                ext.define_macros.append(("GLOBALTENSOR_WITH_CUBLASLT", "1"))
                ext.include_dirs.append(cublas)
            ext.include_dirs.append(os.path.join(home, "include"))
            ext.library_dirs.append(os.path.join(home, "lib64"))
            ext.libraries += ["cudart_static", "dl", "rt", "pthread"]
        if have_mvec():
            ext.define_macros.append(("GT_WITH_MVEC", "1"))
            ext.libraries.append("mvec")
        super().build_extension(ext)


def have_mvec():
    """Whether glibc's vector math library (libmvec, glibc >= 2.35, x86-64) links here: GELU's
    float32 kernel then runs four lanes at a time through its erff and expf."""
    import tempfile
    cxx = os.environ.get("CXX", "c++")
    probe = ('#include <emmintrin.h>\nextern "C" __m128 _ZGVbN4v_erff(__m128);\nextern "C" __m128 _ZGVbN4v_expf(__m128);\n'
             "int main() { return (int)_mm_cvtss_f32(_ZGVbN4v_expf(_ZGVbN4v_erff(_mm_set1_ps(0.5f)))); }\n")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cpp")
        with open(src, "w") as f:
            f.write(probe)
        try:
            return subprocess.run([cxx, src, "-o", os.path.join(tmp, "probe"), "-lmvec"], capture_output=True,
                                  timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


ext = Pybind11Extension(
    "globaltensor._native",
    sorted(glob.glob("kernels/*.cpp")) + sorted(glob.glob("bindings/*.cpp")),  # module.cpp: the one PYBIND11_MODULE
    cxx_std=17,
    extra_compile_args=["-O3", "-fvisibility=hidden", "-ffp-contract=off"],  # numpy's rounding
    libraries=["rt"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
