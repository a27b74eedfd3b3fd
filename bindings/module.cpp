// The only PYBIND11_MODULE: validates arguments, releases the GIL, one m.def/method each.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "../kernels/axpby.h"
#include "../kernels/conv.h"
#include "../kernels/norm.h"
#include "../kernels/special.h"
#ifdef GLOBALTENSOR_WITH_CUDA
#include "../kernels/cuda_ipc.h"
#endif
#ifdef GLOBALTENSOR_WITH_CUBLASLT
#include "../kernels/cuda_linear.h"
#endif
#include "../kernels/group.h"
#include "../kernels/numpy_alloc.h"
#include "../kernels/philox.h"
#include "../kernels/reduce.h"

namespace py = pybind11;
using gt::Group;
using gt::Node;

namespace {

// A block of this rank's shared-memory arena, exposed through the buffer protocol; the
// block goes back to the arena when the last numpy view of it is gone.
struct ShmBuffer {
  ShmBuffer(std::shared_ptr<Node> n, int64_t off, size_t size) : node(std::move(n)), offset(off), nbytes(size) {}
  ShmBuffer(const ShmBuffer&) = delete;  // a copy would free the block twice
  ShmBuffer& operator=(const ShmBuffer&) = delete;
  ~ShmBuffer() { node->arena().free(offset); }
  std::shared_ptr<Node> node;
  int64_t offset;
  size_t nbytes;
  char* data() const { return node->arena().base() + offset; }
};

struct View {
  char* ptr;
  size_t nbytes;
};

View contiguous(const py::array& a, const char* what, bool writable) {
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + " must be C-contiguous");
  if (writable && !a.writeable()) throw py::value_error(std::string(what) + " must be writable");
  return View{static_cast<char*>(const_cast<void*>(a.data())), size_t(a.nbytes())};
}

std::vector<uint64_t> byte_counts(const std::vector<int64_t>& counts, int k, const char* what) {
  if (int(counts.size()) != k)
    throw py::value_error(std::string(what) + " needs one entry per group member (" + std::to_string(k) + ")");
  std::vector<uint64_t> out;
  for (int64_t c : counts) {
    if (c < 0) throw py::value_error(std::string(what) + " must not be negative");
    out.push_back(uint64_t(c));
  }
  return out;
}

// The gt::DType of an array's elements (ml_dtypes' bfloat16 included), or -1 for a type
// kernels/types.h does not number, or bytes not in this machine's order.
int32_t dtype_code(const py::array& a) {
  py::dtype dt = a.dtype();
  char order = dt.byteorder();
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if (order == '<') return -1;
#else
  if (order == '>') return -1;
#endif
  py::ssize_t size = dt.itemsize();
  switch (dt.kind()) {
    case 'f': return size == 4 ? gt::kF32 : size == 8 ? gt::kF64 : size == 2 ? gt::kF16 : -1;
    case 'i': return size == 4 ? gt::kI32 : size == 8 ? gt::kI64 : size == 1 ? gt::kI8 : -1;
    case 'u': return size == 1 ? gt::kU8 : -1;
    case 'b': return gt::kBool;
    case 'V': {  // a user type: ml_dtypes' bfloat16 is one descriptor, remembered once seen
      static PyObject* bfloat16 = nullptr;
      if (dt.ptr() == bfloat16) return gt::kBF16;
      if (size != 2 || py::str(dt.attr("name")).cast<std::string>() != "bfloat16") return -1;
      if (!bfloat16) bfloat16 = dt.inc_ref().ptr();
      return gt::kBF16;
    }
    default: return -1;
  }
}

std::string dtype_text(const py::array& a) {
  int32_t code = dtype_code(a);
  return code >= 0 ? gt::dtype_name(code) : std::string(py::str(a.dtype()));
}

// The arithmetic dtype of `a` (kernels/types.h's is_arithmetic), else TypeError:
// "<what>: cannot reduce dtype bool; supported: float32, ...".
gt::DType arithmetic_dtype(const py::array& a, const char* what) {
  int32_t code = dtype_code(a);
  if (gt::is_arithmetic(code)) return gt::DType(code);
  std::string supported;
  for (int32_t d = 0; d < gt::kNumDTypes; ++d)
    if (gt::is_arithmetic(d)) supported += std::string(supported.empty() ? "" : ", ") + gt::dtype_name(d);
  throw py::type_error(std::string(what) + " dtype " + dtype_text(a) + "; supported: " + supported);
}

// x's dtype, float32 or float64, else TypeError "<what> takes float32 or float64 arrays".
gt::DType float_dtype(const py::array& x, const char* what) {
  int32_t code = dtype_code(x);
  if (code != gt::kF32 && code != gt::kF64) throw py::type_error(std::string(what) + " takes float32 or float64 arrays");
  return gt::DType(code);
}

// The reduction's dtype, from `in` (out must match): what every reducing binding takes.
gt::DType reduce_dtype(const py::array& in, const py::array& out, const char* what) {
  gt::DType dtype = arithmetic_dtype(in, (std::string(what) + ": cannot reduce").c_str());
  if (dtype_code(out) != dtype)
    throw py::type_error(std::string(what) + ": the output's dtype (" + dtype_text(out) + ") differs from the input's (" +
                         gt::dtype_name(dtype) + ")");
  return dtype;
}

#ifdef GLOBALTENSOR_WITH_CUDA
// _C.cuda: device memory, IPC handles and the reduction of the IPC all-reduce. Device
// pointers and streams are Python ints; every call raises RuntimeError with CUDA's words.
void bind_cuda(py::module_& m) {
  namespace cu = gt::cuda;
  auto c = m.def_submodule("cuda", "CUDA kernels (built with nvcc); pointers and streams are ints, dtypes _C.DType");
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
#endif

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "globaltensor native kernels: shared-memory collectives and reductions";

  auto base_error = py::register_exception<gt::CollectiveError>(m, "CollectiveError", PyExc_RuntimeError);
  py::register_exception<gt::CollectiveTimeout>(m, "CollectiveTimeoutError", base_error);
  py::register_exception<gt::ShmExhausted>(m, "SharedMemoryExhausted", PyExc_MemoryError);

  // kernels/types.h's two tables, the only numbering of dtypes and reduction ops: Python reads
  // them from here (globaltensor/dtype.py, distributed/collectives.py) and sends their codes.
  py::enum_<gt::DType> dtypes(m, "DType", "Element types as the kernels number them; members named as numpy names them.");
  for (int32_t d = 0; d < gt::kNumDTypes; ++d) dtypes.value(gt::kDTypeNames[d], gt::DType(d));
  dtypes.def_property_readonly("arithmetic", [](gt::DType d) { return gt::is_arithmetic(d); },
                               "Whether reductions and random fills take this type (else it is only moved).");
  dtypes.def_property_readonly("itemsize", [](gt::DType d) { return gt::dtype_size(d); });
  py::enum_<gt::RedOp> redops(m, "RedOp", "Reduction ops of all_reduce, reduce_scatter and reduce_into.");
  for (int32_t r = 0; r < gt::kNumRedOps; ++r) redops.value(gt::kRedOpNames[r], gt::RedOp(r));
  m.def("dtype_of", [](py::array a) -> py::object {
    int32_t code = dtype_code(a);
    return code < 0 ? py::object(py::none()) : py::cast(gt::DType(code));
  }, py::arg("array"), "The _C.DType of an array's elements (None for a type the kernels do not number).");
#ifdef GLOBALTENSOR_WITH_CUDA
  bind_cuda(m);
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
#ifdef GLOBALTENSOR_WITH_CUBLASLT
  m.attr("with_cublaslt") = true;
#else
  m.attr("with_cublaslt") = false;
#endif

  m.def("collective_hint", [] { return std::string(gt::collective_hint()); },
        "The advice every error about ranks that did not meet in a collective ends with.");
  m.def("reduce_into", [](py::array out, std::vector<py::array> srcs, gt::RedOp redop, bool nontemporal) {
    View o = contiguous(out, "out", true);
    gt::DType dtype = arithmetic_dtype(out, "reduce_into: cannot reduce");
    std::vector<const void*> ptrs;
    for (auto& s : srcs) {
      View v = contiguous(s, "each source", false);
      if (v.nbytes != o.nbytes) throw py::value_error("every source must have the size of out");
      if (dtype_code(s) != dtype)
        throw py::type_error("reduce_into: a source's dtype (" + dtype_text(s) + ") differs from out's (" +
                             gt::dtype_name(dtype) + ")");
      ptrs.push_back(v.ptr);
    }
    size_t count = o.nbytes / gt::dtype_size(dtype);
    void* dst = o.ptr;
    py::gil_scoped_release release;
    gt::reduce_to(&dst, 1, ptrs.data(), int(ptrs.size()), count, dtype, redop, nontemporal);
  }, py::arg("out"), py::arg("srcs"), py::arg("redop"), py::arg("nontemporal") = false,
     "out = srcs[0] (op) srcs[1] (op) ... (redop a _C.RedOp), in out's dtype, which every source shares; "
     "half types accumulate in float32.");

  m.def("copy_bytes", [](py::array dst, py::array src, bool nontemporal) {
    View d = contiguous(dst, "dst", true), s = contiguous(src, "src", false);
    if (d.nbytes != s.nbytes) throw py::value_error("dst and src must have the same number of bytes");
    py::gil_scoped_release release;
    gt::copy_bytes(d.ptr, s.ptr, d.nbytes, nontemporal);
  }, py::arg("dst"), py::arg("src"), py::arg("nontemporal") = false, "memcpy, optionally with streaming stores.");

  m.def("erf", [](py::array out, py::array x) {
    View vo = contiguous(out, "out", true), vx = contiguous(x, "x", false);
    if (!out.dtype().equal(x.dtype()) || vo.nbytes != vx.nbytes) throw py::value_error("out and x must match in dtype and size");
    gt::DType dtype = float_dtype(x, "erf");
    size_t count = vx.nbytes / gt::dtype_size(dtype);
    py::gil_scoped_release release;
    gt::erf(vo.ptr, vx.ptr, count, dtype);
  }, py::arg("out"), py::arg("x"), "out = erf(x) element-wise (libm's erf; float32 through double, as math.erf).");

  m.def("gelu", [](py::array out, py::array x) {
    View vo = contiguous(out, "out", true), vx = contiguous(x, "x", false);
    if (!out.dtype().equal(x.dtype()) || vo.nbytes != vx.nbytes) throw py::value_error("out and x must match in dtype and size");
    gt::DType dtype = float_dtype(x, "gelu");
    size_t count = vx.nbytes / gt::dtype_size(dtype);
    py::gil_scoped_release release;
    gt::gelu(vo.ptr, vx.ptr, count, dtype);
  }, py::arg("out"), py::arg("x"), "out = x * Phi(x) element-wise (exact GELU; float32 through glibc's vector erff).");

  m.def("gelu_backward", [](py::array out, py::array g, py::array x) {
    View vo = contiguous(out, "out", true), vg = contiguous(g, "g", false), vx = contiguous(x, "x", false);
    if (!out.dtype().equal(x.dtype()) || !g.dtype().equal(x.dtype()) || vo.nbytes != vx.nbytes || vg.nbytes != vx.nbytes)
      throw py::value_error("out, g and x must match in dtype and size");
    gt::DType dtype = float_dtype(x, "gelu_backward");
    size_t count = vx.nbytes / gt::dtype_size(dtype);
    py::gil_scoped_release release;
    gt::gelu_backward(vo.ptr, vg.ptr, vx.ptr, count, dtype);
  }, py::arg("out"), py::arg("g"), py::arg("x"), "out = g * (Phi(x) + x * phi(x)): GELU's gradient.");

  m.def("layer_norm", [](py::array y, py::array mean, py::array rstd, py::array x, py::object w, py::object b,
                         double eps) {
    View vy = contiguous(y, "y", true), vm = contiguous(mean, "mean", true), vr = contiguous(rstd, "rstd", true);
    View vx = contiguous(x, "x", false);
    gt::DType dtype = float_dtype(x, "layer_norm");
    size_t item = gt::dtype_size(dtype), rows = vm.nbytes / item, count = vx.nbytes / item;
    size_t cols = rows ? count / rows : 0;
    auto optional = [&](const py::object& o, const char* what) -> const void* {
      if (o.is_none()) return nullptr;
      py::array a = o.cast<py::array>();
      View v = contiguous(a, what, false);
      if (!a.dtype().equal(x.dtype()) || v.nbytes != cols * item) throw py::value_error(std::string(what) + " must hold one value per column, in x's dtype");
      return v.ptr;
    };
    const void* pw = optional(w, "w");
    const void* pb = optional(b, "b");
    for (const py::array* a : {&y, &mean, &rstd})
      if (!a->dtype().equal(x.dtype())) throw py::value_error("layer_norm's outputs must be in x's dtype");
    if (vy.nbytes != vx.nbytes || vr.nbytes != vm.nbytes || rows * cols != count)
      throw py::value_error("layer_norm: y like x, mean and rstd one value per row");
    py::gil_scoped_release release;
    gt::layer_norm(vy.ptr, vm.ptr, vr.ptr, vx.ptr, pw, pb, rows, cols, eps, dtype);
  }, py::arg("y"), py::arg("mean"), py::arg("rstd"), py::arg("x"), py::arg("w"), py::arg("b"), py::arg("eps"),
     "LayerNorm over the last dim of x [rows, cols] (mean and rstd one per row), one row at a time.");

  m.def("layer_norm_backward", [](py::object dx, py::object dw, py::object db, py::array g, py::array x,
                                  py::array mean, py::array rstd, py::object w) {
    View vg = contiguous(g, "g", false), vx = contiguous(x, "x", false);
    View vm = contiguous(mean, "mean", false), vr = contiguous(rstd, "rstd", false);
    gt::DType dtype = float_dtype(x, "layer_norm_backward");
    size_t item = gt::dtype_size(dtype), rows = vm.nbytes / item, count = vx.nbytes / item;
    size_t cols = rows ? count / rows : 0;
    for (const py::array* a : {&g, &mean, &rstd})
      if (!a->dtype().equal(x.dtype())) throw py::value_error("layer_norm_backward's inputs must share x's dtype");
    if (vg.nbytes != vx.nbytes || vr.nbytes != vm.nbytes || rows * cols != count)
      throw py::value_error("layer_norm_backward: g like x, mean and rstd one value per row");
    auto optional = [&](const py::object& o, const char* what, bool writable, size_t nbytes) -> void* {
      if (o.is_none()) return nullptr;
      py::array a = o.cast<py::array>();
      View v = contiguous(a, what, writable);
      if (!a.dtype().equal(x.dtype()) || v.nbytes != nbytes) throw py::value_error(std::string(what) + " has the wrong size or dtype");
      return v.ptr;
    };
    void* pdx = optional(dx, "dx", true, vx.nbytes);
    void* pdw = optional(dw, "dw", true, cols * item);
    void* pdb = optional(db, "db", true, cols * item);
    const void* pw = optional(w, "w", false, cols * item);
    py::gil_scoped_release release;
    gt::layer_norm_backward(pdx, pdw, pdb, vg.ptr, vx.ptr, vm.ptr, vr.ptr, pw, rows, cols, dtype);
  }, py::arg("dx"), py::arg("dw"), py::arg("db"), py::arg("g"), py::arg("x"), py::arg("mean"), py::arg("rstd"),
     py::arg("w"), "LayerNorm's gradient: dx (or None), and dw, db (or None) summed over the rows.");

  // BatchNorm's per-channel passes over x viewed as [n, c, hw] (C-contiguous, float32/float64).
  auto channel_dtype = [](const py::array& x, const char* what) {
    gt::DType dtype = float_dtype(x, what);
    if (x.ndim() < 2) throw py::value_error(std::string(what) + " needs x of at least 2 dims [N, C, ...]");
    return dtype;
  };
  auto nchw = [](const py::array& x) {
    size_t hw = 1;
    for (py::ssize_t d = 2; d < x.ndim(); ++d) hw *= size_t(x.shape(d));
    return std::array<size_t, 3>{size_t(x.shape(0)), size_t(x.shape(1)), hw};
  };
  auto per_channel = [](const py::array& v, const py::array& x, size_t c, const char* what, bool writable, bool f64) {
    View view = contiguous(v, what, writable);
    bool ok = f64 ? v.dtype().equal(py::dtype::of<double>()) : v.dtype().equal(x.dtype());
    if (!ok || view.nbytes != c * (f64 ? 8 : size_t(x.itemsize())))
      throw py::value_error(std::string(what) + " must hold one value per channel (" + (f64 ? "float64" : "x's dtype") + ")");
    return view.ptr;
  };
  m.def("channel_sums", [=](py::array s1, py::array s2, py::array x) {
    gt::DType dtype = channel_dtype(x, "channel_sums");
    View vx = contiguous(x, "x", false);
    auto d = nchw(x);
    auto* p1 = reinterpret_cast<double*>(per_channel(s1, x, d[1], "s1", true, true));
    auto* p2 = reinterpret_cast<double*>(per_channel(s2, x, d[1], "s2", true, true));
    py::gil_scoped_release release;
    gt::channel_sums(p1, p2, vx.ptr, d[0], d[1], d[2], dtype);
  }, py::arg("s1"), py::arg("s2"), py::arg("x"), "Per channel (dim 1) of x: the sum and the sum of squares (float64).");
  m.def("channel_affine", [=](py::array y, py::array x, py::array a, py::array b) {
    gt::DType dtype = channel_dtype(x, "channel_affine");
    View vy = contiguous(y, "y", true), vx = contiguous(x, "x", false);
    if (!y.dtype().equal(x.dtype()) || vy.nbytes != vx.nbytes) throw py::value_error("y must be like x");
    auto d = nchw(x);
    void* pa = per_channel(a, x, d[1], "a", false, false);
    void* pb = per_channel(b, x, d[1], "b", false, false);
    py::gil_scoped_release release;
    gt::channel_affine(vy.ptr, vx.ptr, pa, pb, d[0], d[1], d[2], dtype);
  }, py::arg("y"), py::arg("x"), py::arg("a"), py::arg("b"), "y = x * a[c] + b[c] per channel (dim 1).");
  m.def("channel_affine_backward", [=](py::array dx, py::array sum_g, py::array sum_gx, py::array g, py::array x,
                                       py::array a) {
    gt::DType dtype = channel_dtype(x, "channel_affine_backward");
    View vd = contiguous(dx, "dx", true), vg = contiguous(g, "g", false), vx = contiguous(x, "x", false);
    if (!dx.dtype().equal(x.dtype()) || !g.dtype().equal(x.dtype()) || vd.nbytes != vx.nbytes || vg.nbytes != vx.nbytes)
      throw py::value_error("dx and g must be like x");
    auto d = nchw(x);
    auto* p1 = reinterpret_cast<double*>(per_channel(sum_g, x, d[1], "sum_g", true, true));
    auto* p2 = reinterpret_cast<double*>(per_channel(sum_gx, x, d[1], "sum_gx", true, true));
    void* pa = per_channel(a, x, d[1], "a", false, false);
    py::gil_scoped_release release;
    gt::channel_affine_backward(vd.ptr, p1, p2, vg.ptr, vx.ptr, pa, d[0], d[1], d[2], dtype);
  }, py::arg("dx"), py::arg("sum_g"), py::arg("sum_gx"), py::arg("g"), py::arg("x"), py::arg("a"),
     "dx = g * a[c]; per channel the sums of g and of g * x (float64): channel_affine's gradient.");

  // Convolution patches: x [n, c, h, w] <-> cols [c, kh, kw, n, oh, ow] (float32/float64).
  auto conv_geometry = [](const py::array& x, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
                          std::array<size_t, 2> padding, std::array<size_t, 2> dilation) {
    if (x.ndim() != 4) throw py::value_error("conv patches need x of 4 dims [N, C, H, W]");
    gt::ConvGeometry g{size_t(x.shape(0)), size_t(x.shape(1)), size_t(x.shape(2)), size_t(x.shape(3)), kernel[0],
                       kernel[1], 0, 0, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
    if (!g.sh || !g.sw || !g.dh || !g.dw || !g.kh || !g.kw) throw py::value_error("conv patches: zero kernel, stride or dilation");
    long oh = (long(g.h + 2 * g.ph) - long(g.dh * (g.kh - 1)) - 1) / long(g.sh) + 1;
    long ow = (long(g.w + 2 * g.pw) - long(g.dw * (g.kw - 1)) - 1) / long(g.sw) + 1;
    if (oh <= 0 || ow <= 0) throw py::value_error("conv patches: the kernel is larger than the padded input");
    g.oh = size_t(oh);
    g.ow = size_t(ow);
    return g;
  };
  auto conv_dtype = [](const py::array& a, const py::array& b) {
    int32_t dtype = dtype_code(a);
    if ((dtype != gt::kF32 && dtype != gt::kF64) || dtype_code(b) != dtype)
      throw py::type_error("conv patches take float32 or float64 arrays of one dtype");
    return gt::DType(dtype);
  };
  m.def("im2col", [=](py::array cols, py::array x, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
                      std::array<size_t, 2> padding, std::array<size_t, 2> dilation) {
    gt::ConvGeometry g = conv_geometry(x, kernel, stride, padding, dilation);
    gt::DType dtype = conv_dtype(x, cols);
    View vc = contiguous(cols, "cols", true), vx = contiguous(x, "x", false);
    if (vc.nbytes != g.c * g.kh * g.kw * g.n * g.oh * g.ow * size_t(x.itemsize()))
      throw py::value_error("im2col: cols must hold [C, kh, kw, N, oh, ow]");
    py::gil_scoped_release release;
    gt::im2col(vc.ptr, vx.ptr, g, dtype);
  }, py::arg("cols"), py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
     "cols [C, kh, kw, N, oh, ow] = every window tap of x [N, C, H, W] (zeros in the padding).");
  m.def("col2im", [=](py::array dx, py::array cols, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
                      std::array<size_t, 2> padding, std::array<size_t, 2> dilation) {
    gt::ConvGeometry g = conv_geometry(dx, kernel, stride, padding, dilation);
    gt::DType dtype = conv_dtype(dx, cols);
    View vd = contiguous(dx, "dx", true), vc = contiguous(cols, "cols", false);
    if (vc.nbytes != g.c * g.kh * g.kw * g.n * g.oh * g.ow * size_t(dx.itemsize()))
      throw py::value_error("col2im: cols must hold [C, kh, kw, N, oh, ow]");
    py::gil_scoped_release release;
    gt::col2im(vd.ptr, vc.ptr, g, dtype);
  }, py::arg("dx"), py::arg("cols"), py::arg("kernel"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
     "dx [N, C, H, W] = im2col's adjoint of cols (each tap added where it read; the padding dropped).");

  m.def("max_pool", [=](py::array out, py::array tap, py::array x, std::array<size_t, 2> kernel,
                        std::array<size_t, 2> stride) {
    gt::ConvGeometry g = conv_geometry(x, kernel, stride, {0, 0}, {1, 1});
    gt::DType dtype = conv_dtype(x, out);
    View vo = contiguous(out, "out", true), vt = contiguous(tap, "tap", true), vx = contiguous(x, "x", false);
    size_t count = g.n * g.c * g.oh * g.ow;
    if (vo.nbytes != count * size_t(x.itemsize()) || !tap.dtype().equal(py::dtype::of<int64_t>()) || vt.nbytes != count * 8)
      throw py::value_error("max_pool: out [N, C, oh, ow] in x's dtype, tap [N, C, oh, ow] int64");
    py::gil_scoped_release release;
    gt::max_pool(vo.ptr, reinterpret_cast<int64_t*>(vt.ptr), vx.ptr, g, dtype);
  }, py::arg("out"), py::arg("tap"), py::arg("x"), py::arg("kernel"), py::arg("stride"),
     "Max pooling without padding: out, and tap (the first largest element's index in its window).");
  m.def("max_pool_backward", [=](py::array dx, py::array grad, py::array tap, std::array<size_t, 2> kernel,
                                 std::array<size_t, 2> stride) {
    gt::ConvGeometry g = conv_geometry(dx, kernel, stride, {0, 0}, {1, 1});
    gt::DType dtype = conv_dtype(dx, grad);
    View vd = contiguous(dx, "dx", true), vg = contiguous(grad, "grad", false), vt = contiguous(tap, "tap", false);
    size_t count = g.n * g.c * g.oh * g.ow;
    if (vg.nbytes != count * size_t(dx.itemsize()) || !tap.dtype().equal(py::dtype::of<int64_t>()) || vt.nbytes != count * 8)
      throw py::value_error("max_pool_backward: grad [N, C, oh, ow] in dx's dtype, tap int64 alike");
    py::gil_scoped_release release;
    gt::max_pool_backward(vd.ptr, vg.ptr, reinterpret_cast<const int64_t*>(vt.ptr), g, dtype);
  }, py::arg("dx"), py::arg("grad"), py::arg("tap"), py::arg("kernel"), py::arg("stride"),
     "Max pooling's backward: each window's gradient added at its tap.");

  m.def("axpby", [](py::array y, py::array x, double a, double b) {
    View vy = contiguous(y, "y", true), vx = contiguous(x, "x", false);
    if (!y.dtype().equal(x.dtype()) || vy.nbytes != vx.nbytes) throw py::value_error("y and x must match in dtype and size");
    gt::DType dtype = float_dtype(y, "axpby");
    if (vy.ptr < vx.ptr + vx.nbytes && vx.ptr < vy.ptr + vy.nbytes) throw py::value_error("y and x must not overlap");
    py::gil_scoped_release release;
    gt::axpby(vy.ptr, vx.ptr, a, b, size_t(y.size()), dtype);
  }, py::arg("y"), py::arg("x"), py::arg("a"), py::arg("b"),
     "y = b*y + a*x in place (float32/float64), each product rounded as numpy would.");

  py::enum_<gt::RandomKind>(m, "RandomKind", "What philox_fill draws (kernels/philox.h).")
      .value("uniform", gt::kUniform)
      .value("normal", gt::kNormal)
      .value("randint", gt::kRandint)
      .value("bernoulli", gt::kBernoulli);
  m.def("philox_fill", [](py::array out, gt::RandomKind kind, std::vector<int64_t> global_shape,
                          std::vector<int64_t> starts, uint64_t seed, uint64_t counter, double a, double b) {
    View o = contiguous(out, "out", true);
    size_t nd = global_shape.size();
    if (starts.size() != nd || size_t(out.ndim()) != nd)
      throw py::value_error("global_shape, starts and out must have the same number of dimensions");
    std::vector<int64_t> local(nd);
    for (size_t d = 0; d < nd; ++d) {
      local[d] = out.shape(d);
      if (starts[d] < 0 || starts[d] + local[d] > global_shape[d])
        throw py::value_error("the piece lies outside the global shape");
    }
    gt::DType dtype = arithmetic_dtype(out, "philox_fill: cannot draw random values of");
    gt::RandomBox box{int(nd), global_shape.data(), starts.data(), local.data()};
    py::gil_scoped_release release;
    gt::philox_fill(o.ptr, dtype, kind, box, seed, counter, a, b);
  }, py::arg("out"), py::arg("kind"), py::arg("global_shape"), py::arg("starts"), py::arg("seed"),
     py::arg("counter"), py::arg("a"), py::arg("b"),
     "Fill out, the piece of a global tensor starting at `starts`, from Philox4x32-10 keyed by "
     "(seed, counter) at each element's global index, in out's dtype.");

  m.def("philox4x32", [](std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
    std::array<uint32_t, 4> out;
    gt::philox4x32(ctr.data(), key.data(), out.data());
    return out;
  }, py::arg("counter"), py::arg("key"), "The four words of Philox4x32-10 (for tests against known answers).");

  py::class_<ShmBuffer, std::shared_ptr<ShmBuffer>>(m, "ShmBuffer", py::buffer_protocol(),
      "A block of this rank's shared-memory arena (peers read it without a copy).")
      .def_buffer([](ShmBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {py::ssize_t(b.nbytes)}, {py::ssize_t(1)}, false);
      })
      .def_readonly("nbytes", &ShmBuffer::nbytes)
      .def_readonly("offset", &ShmBuffer::offset);

  py::class_<Node, std::shared_ptr<Node>>(m, "Node", "This rank's shared-memory arena and its peers' mappings.")
      .def(py::init<const std::string&, int, size_t>(), py::arg("prefix"), py::arg("rank"), py::arg("arena_bytes"))
      .def("map_peer", &Node::map_peer, py::arg("rank"), py::arg("path") = "",
           "Map the arena of another rank on this node (by its /proc/<pid>/fd/<fd> path).")
      .def_property_readonly("arena_fd", [](Node& n) { return n.arena().fd(); },
                             "The open file of this rank's arena (it has no name: peers open /proc/<pid>/fd/<fd>).")
      .def("unlink_arena", [](Node& n) { n.arena().unlink(); }, "Remove the arena's name once every peer mapped it.")
      .def("mark_finished", &Node::mark_finished, py::arg("how"),
           "Tell peers waiting for this rank that its script ended (how: 'finished the script', ...).")
      .def("give_up", &Node::give_up, py::arg("what"),
           "This rank raised outside a collective and goes on: peers waiting for it fail now, told `what`.")
      .def("alloc", [](std::shared_ptr<Node> n, size_t nbytes) {
        int64_t off = n->arena().alloc(nbytes);
        return std::make_shared<ShmBuffer>(n, off, nbytes);
      }, py::arg("nbytes"), "A block of the arena of at least nbytes.")
      .def("contains", [](Node& n, py::array a) {
        return n.arena().offset_of(a.data(), size_t(a.nbytes())) >= 0;
      }, py::arg("array"), "Whether the array's memory lies in this rank's arena.")
      .def("release_cached", [](Node& n) { n.arena().release_cached(); }, "Return free arena pages to the system.")
      .def_property_readonly("used_bytes", [](Node& n) { return n.arena().used_bytes(); })
      .def_property_readonly("cached_bytes", [](Node& n) { return n.arena().cached_bytes(); })
      .def_property_readonly("peak_bytes", [](Node& n) { return n.arena().peak_bytes(); })
      .def_property_readonly("reserve_bytes", [](Node& n) { return n.arena().reserve(); })
      .def("reset_peak", [](Node& n) { n.arena().reset_peak(); }, "Start the peak over from what is in use now.")
      .def_property_readonly("rank", &Node::rank);

  m.def("install_numpy_allocator", &gt::install_numpy_allocator, py::arg("node"), py::arg("min_bytes"),
        "Make the node's arena numpy's allocator (NEP 49) for arrays of at least min_bytes, in this context; "
        "False when numpy has no NEP 49 API.");
  m.def("uninstall_numpy_allocator", &gt::uninstall_numpy_allocator, "Put numpy's previous allocator back.");
  m.def("numpy_alloc_stats", [] {
    auto s = gt::numpy_alloc_stats();
    py::dict d;
    d["installed"] = s.installed;
    d["arena_allocs"] = s.arena_allocs;
    d["heap_fallbacks"] = s.heap_fallbacks;
    d["heap_fallback_bytes"] = s.heap_fallback_bytes;
    d["min_bytes"] = s.min_bytes;
    return d;
  }, "Counters of numpy's arena allocator.");
  m.def("size_class", &gt::size_class, py::arg("nbytes"), "The block size the allocator gives nbytes.");

  py::class_<gt::Work, std::shared_ptr<gt::Work>>(m, "Work", "Completion of one asynchronous collective.")
      .def("wait", [](gt::Work& w) { py::gil_scoped_release r; w.wait(); },
           "Block until it ran; raises its error (CollectiveTimeoutError, ...).")
      .def("done", &gt::Work::done);

  py::class_<Group, std::shared_ptr<Group>>(m, "Group", "A group of ranks on one node and its collectives.")
      .def(py::init([](std::shared_ptr<Node> node, const std::string& name, std::vector<int> ranks, int index,
                       double timeout, size_t stage_bytes, size_t oneshot_bytes, size_t nontemporal_bytes,
                       double deadlock_s) {
        gt::GroupOptions o;
        o.timeout_s = timeout;
        o.deadlock_s = deadlock_s;
        o.stage_bytes = stage_bytes;
        o.oneshot_bytes = oneshot_bytes;
        o.nontemporal_bytes = nontemporal_bytes;
        return std::make_shared<Group>(node, name, ranks, index, o);
      }), py::arg("node"), py::arg("name"), py::arg("ranks"), py::arg("index"), py::arg("timeout"),
          py::arg("stage_bytes"), py::arg("oneshot_bytes"), py::arg("nontemporal_bytes"), py::arg("deadlock_s") = 2.0)
      .def("barrier", [](Group& g) { py::gil_scoped_release r; g.barrier(); })
      .def("broadcast", [](Group& g, py::array buf, int root) {
        View v = contiguous(buf, "buffer", true);
        py::gil_scoped_release r;
        g.broadcast(v.ptr, v.nbytes, root);
      }, py::arg("buf"), py::arg("root"))
      .def("all_gather", [](Group& g, py::array in, py::array out) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        py::gil_scoped_release r;
        g.all_gather(i.ptr, i.nbytes, o.ptr, o.nbytes);
      }, py::arg("input"), py::arg("output"))
      .def("reduce_scatter", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, "reduce_scatter");
        size_t esz = gt::dtype_size(dtype);
        py::gil_scoped_release r;
        g.reduce_scatter(i.ptr, i.nbytes / esz, o.ptr, o.nbytes / esz, dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"), "Reduce (a _C.RedOp) in the input's dtype.")
      .def("all_reduce", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, "all_reduce");
        if (i.nbytes != o.nbytes) throw py::value_error("all_reduce input and output differ in size");
        py::gil_scoped_release r;
        g.all_reduce(i.ptr, o.ptr, i.nbytes / gt::dtype_size(dtype), dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"), "Reduce (a _C.RedOp) in the input's dtype.")
      .def("all_reduce_async", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, "all_reduce_async");
        if (i.nbytes != o.nbytes) throw py::value_error("all_reduce input and output differ in size");
        return g.all_reduce_async(i.ptr, o.ptr, i.nbytes / gt::dtype_size(dtype), dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"),
         "all_reduce on the group's worker thread; the caller keeps the arrays alive until wait().")
      .def("drain", [](Group& g) { py::gil_scoped_release r; g.drain(); },
           "Wait until the queued asynchronous ops have run.")
      .def("all_to_all", [](Group& g, py::array in, std::vector<int64_t> send, py::array out,
                            std::vector<int64_t> recv) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        auto s = byte_counts(send, g.size(), "send_bytes"), rc = byte_counts(recv, g.size(), "recv_bytes");
        uint64_t ts = 0, tr = 0;
        for (auto v : s) ts += v;
        for (auto v : rc) tr += v;
        if (ts != i.nbytes || tr != o.nbytes) throw py::value_error("all_to_all byte counts do not match the buffers");
        py::gil_scoped_release r;
        g.all_to_all(i.ptr, s.data(), o.ptr, rc.data());
      }, py::arg("input"), py::arg("send_bytes"), py::arg("output"), py::arg("recv_bytes"))
      .def_property("timeout", &Group::timeout, &Group::set_timeout)
      .def_property_readonly("size", &Group::size)
      .def_property_readonly("index", &Group::index)
      .def_property_readonly("ranks", &Group::ranks);
}
