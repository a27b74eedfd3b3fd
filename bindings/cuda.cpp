// The _native.cuda submodule: CUDA device memory, IPC handles, the IPC all-reduce's sum, and cuBLASLt matmuls.
#include "common.h"

#ifdef GLOBALTENSOR_WITH_CUDA
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../kernels/cuda_ipc.h"
#ifdef GLOBALTENSOR_WITH_CUBLASLT
#include "../kernels/cuda_linear.h"
#endif

namespace gt {
namespace bindings {

// _native.cuda: device memory, IPC handles and the reduction of the IPC all-reduce. Device
// pointers and streams are Python ints; every call raises RuntimeError with CUDA's words.
void bind_cuda(py::module_& m) {
  namespace cu = gt::cuda;
  auto c = m.def_submodule("cuda", "CUDA kernels (built with nvcc); pointers and streams are ints, dtypes _native.DType");
  c.def("device_count", &cu::device_count, "GPUs visible to this process (0 without a driver).");
  c.def("set_device", &cu::set_device, py::arg("device"));
  c.def("malloc", [](size_t n) { return reinterpret_cast<uintptr_t>(cu::malloc_device(n)); }, py::arg("nbytes"));
  c.def("free", [](uintptr_t p) { cu::free_device(reinterpret_cast<void*>(p)); }, py::arg("ptr"));
  c.def("ipc_handle", [](uintptr_t p) {
    char h[cu::kIpcHandleBytes];
    cu::ipc_handle(reinterpret_cast<void*>(p), h);
    return py::bytes(h, cu::kIpcHandleBytes);
  }, py::arg("ptr"), "The 64-byte IPC handle of a cudaMalloc'd pointer.");
  c.def("ipc_open", [](py::bytes handle) {
    std::string h = handle;
    if (h.size() != size_t(cu::kIpcHandleBytes)) throw py::value_error("an IPC handle has 64 bytes");
    return reinterpret_cast<uintptr_t>(cu::ipc_open(h.data()));
  }, py::arg("handle"), "Map another process's device buffer; returns its pointer here.");
  c.def("ipc_close", [](uintptr_t p) { cu::ipc_close(reinterpret_cast<void*>(p)); }, py::arg("ptr"));
  c.def("copy_async", [](uintptr_t dst, uintptr_t src, size_t n, uintptr_t stream) {
    cu::copy_async(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, stream);
  }, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("stream"));
  c.def("reduce_sum_async", [](uintptr_t dst, std::vector<uintptr_t> srcs, size_t count, gt::DType dtype,
                                uintptr_t stream) {
    std::vector<const void*> ptrs;
    for (auto p : srcs) ptrs.push_back(reinterpret_cast<const void*>(p));
    cu::reduce_sum_async(reinterpret_cast<void*>(dst), ptrs.data(), int(ptrs.size()), count, dtype, stream);
  }, py::arg("dst"), py::arg("srcs"), py::arg("count"), py::arg("dtype"), py::arg("stream"),
     "dst = srcs[0] + srcs[1] + ... in that order (half types accumulate in float32).");
  c.def("synchronize", [](uintptr_t stream) {
    py::gil_scoped_release r;
    cu::synchronize(stream);
  }, py::arg("stream"));
#ifdef GLOBALTENSOR_WITH_CUBLASLT
  c.def("load_cublaslt", &cu::load_cublaslt, py::arg("path") = std::string(),
        "Open libcublasLt (a path, or the loader's search); False when it is not there.");
  c.def("matmul", [](uintptr_t c_, uintptr_t a, uintptr_t b, int64_t m, int64_t n, int64_t k, gt::DType dtype,
                     bool tf32, uintptr_t stream) {
    cu::matmul(reinterpret_cast<void*>(c_), reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b), m, n, k,
               dtype, tf32, stream);
  }, py::arg("c"), py::arg("a"), py::arg("b"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("dtype"),
     py::arg("tf32"), py::arg("stream"), "c (m x n) = a (m x k) @ b (k x n), row-major, through cuBLASLt.");
  c.def("linear_forward", [](uintptr_t y, uintptr_t x, uintptr_t w, uintptr_t bias, int64_t m, int64_t n, int64_t k,
                             gt::DType dtype, int activation, bool tf32, uintptr_t stream) {
    cu::linear_forward(reinterpret_cast<void*>(y), reinterpret_cast<const void*>(x), reinterpret_cast<const void*>(w),
                       reinterpret_cast<const void*>(bias), m, n, k, dtype, activation, tf32, stream);
  }, py::arg("y"), py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("m"), py::arg("n"), py::arg("k"),
     py::arg("dtype"), py::arg("activation"), py::arg("tf32"), py::arg("stream"),
     "y = act(x @ w.T + bias) in one cuBLASLt call (bias 0: none; activation 0 identity, 1 relu, 2 gelu-tanh).");
  c.def("linear_weight_grad", [](uintptr_t dw, uintptr_t dbias, uintptr_t g, uintptr_t x, int64_t m, int64_t n,
                                 int64_t k, gt::DType dtype, bool tf32, uintptr_t stream) {
    cu::linear_weight_grad(reinterpret_cast<void*>(dw), reinterpret_cast<void*>(dbias), reinterpret_cast<const void*>(g),
                           reinterpret_cast<const void*>(x), m, n, k, dtype, tf32, stream);
  }, py::arg("dw"), py::arg("dbias"), py::arg("g"), py::arg("x"), py::arg("m"), py::arg("n"), py::arg("k"),
     py::arg("dtype"), py::arg("tf32"), py::arg("stream"),
     "dw = g.T @ x, and dbias = g summed over rows in the same call (dbias 0: none).");
#endif
}

}  // namespace bindings
}  // namespace gt
#endif
