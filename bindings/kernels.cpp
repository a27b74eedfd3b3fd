// Bindings of the kernels over flat arrays: reductions and copies, erf and GELU, the axpby and Adam updates, Philox fills.
#include <pybind11/stl.h>

#include <array>
#include <string>
#include <vector>

#include "../kernels/adam.h"
#include "../kernels/axpby.h"
#include "../kernels/philox.h"
#include "../kernels/reduce.h"
#include "../kernels/scatter.h"
#include "../kernels/special.h"
#include "common.h"

namespace gt {
namespace bindings {

void bind_kernels(py::module_& m) {
  m.def("reduce_into", [](py::array out, std::vector<py::array> srcs, gt::RedOp redop, bool nontemporal) {
    View o = contiguous(out, "out", true);
    gt::DType dtype = reduction_dtype(out, redop, "reduce_into: cannot reduce");
    std::vector<const void*> ptrs;
    for (auto& s : srcs) {
      View v = contiguous(s, "each source", false);
      if (v.nbytes != o.nbytes) throw py::value_error("every source must have the size of out");
      if (dtype_code(s) != dtype_code(out))
        throw py::type_error("reduce_into: a source's dtype (" + dtype_text(s) + ") differs from out's (" +
                             dtype_text(out) + ")");
      ptrs.push_back(v.ptr);
    }
    size_t count = o.nbytes / gt::dtype_size(dtype);
    void* dst = o.ptr;
    py::gil_scoped_release release;
    gt::reduce_to(&dst, 1, ptrs.data(), int(ptrs.size()), count, dtype, redop, nontemporal);
  }, py::arg("out"), py::arg("srcs"), py::arg("redop"), py::arg("nontemporal") = false,
     "out = srcs[0] (op) srcs[1] (op) ... (redop a _native.RedOp), in out's dtype, which every source shares; "
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

  m.def("relu_backward", [](py::array out, py::array g, py::array x) {
    View vo = contiguous(out, "out", true), vg = contiguous(g, "g", false), vx = contiguous(x, "x", false);
    if (!out.dtype().equal(x.dtype()) || !g.dtype().equal(x.dtype()) || vo.nbytes != vx.nbytes || vg.nbytes != vx.nbytes)
      throw py::value_error("out, g and x must match in dtype and size");
    gt::DType dtype = float_dtype(x, "relu_backward");
    size_t count = vx.nbytes / gt::dtype_size(dtype);
    py::gil_scoped_release release;
    gt::relu_backward(vo.ptr, vg.ptr, vx.ptr, count, dtype);
  }, py::arg("out"), py::arg("g"), py::arg("x"), "out = g * (x > 0): ReLU's gradient in one pass.");

  m.def("index_add_rows", [](py::array out, py::array index, py::array src) {
    View vo = contiguous(out, "out", true), vs = contiguous(src, "src", false);
    View vi = contiguous(index, "index", false);
    if (!index.dtype().equal(py::dtype::of<int64_t>())) throw py::value_error("index must be int64");
    if (!out.dtype().equal(src.dtype()) || out.ndim() < 1 || src.ndim() < 1 || src.shape(0) != index.size())
      throw py::value_error("out and src must share a dtype, src hold one row per index");
    gt::DType dtype = float_dtype(out, "index_add_rows");
    size_t rows = size_t(out.shape(0)), count = size_t(index.size());
    size_t width = rows ? vo.nbytes / gt::dtype_size(dtype) / rows : 0;
    if (vs.nbytes != count * width * gt::dtype_size(dtype)) throw py::value_error("src's rows must be out's rows");
    const int64_t* idx = reinterpret_cast<const int64_t*>(vi.ptr);
    for (size_t i = 0; i < count; ++i)
      if (idx[i] < 0 || size_t(idx[i]) >= rows) throw py::index_error("index_add_rows: an index is out of range");
    py::gil_scoped_release release;
    gt::index_add_rows(vo.ptr, idx, vs.ptr, count, width, dtype);
  }, py::arg("out"), py::arg("index"), py::arg("src"),
     "out[index[i]] += src[i] for i in order (np.add.at along dim 0; float32/float64, C-contiguous).");

  m.def("axpby", [](py::array y, py::array x, double a, double b) {
    View vy = contiguous(y, "y", true), vx = contiguous(x, "x", false);
    if (!y.dtype().equal(x.dtype()) || vy.nbytes != vx.nbytes) throw py::value_error("y and x must match in dtype and size");
    gt::DType dtype = float_dtype(y, "axpby");
    if (vy.ptr < vx.ptr + vx.nbytes && vx.ptr < vy.ptr + vy.nbytes) throw py::value_error("y and x must not overlap");
    py::gil_scoped_release release;
    gt::axpby(vy.ptr, vx.ptr, a, b, size_t(y.size()), dtype);
  }, py::arg("y"), py::arg("x"), py::arg("a"), py::arg("b"),
     "y = b*y + a*x in place (float32/float64), each product rounded as numpy would.");

  m.def("adam_update", [](py::array w, py::array g, py::array m_, py::array v, py::object vmax, double b1, double b2,
                          double eps, double weight_decay, double decay_factor, double step_size, double bias2,
                          bool decoupled) {
    gt::DType dtype = float_dtype(w, "adam_update");
    View vw = contiguous(w, "w", true), vg = contiguous(g, "g", false), vm = contiguous(m_, "m", true),
         vv = contiguous(v, "v", true);
    View vx{nullptr, vw.nbytes};
    py::array amax;
    if (!vmax.is_none()) {
      amax = vmax.cast<py::array>();
      vx = contiguous(amax, "vmax", true);
      if (!amax.dtype().equal(w.dtype())) throw py::value_error("adam_update: vmax must have w's dtype");
    }
    for (const py::array* a : {&g, &m_, &v})
      if (!a->dtype().equal(w.dtype())) throw py::value_error("adam_update: g, m and v must have w's dtype");
    if (vg.nbytes != vw.nbytes || vm.nbytes != vw.nbytes || vv.nbytes != vw.nbytes || vx.nbytes != vw.nbytes)
      throw py::value_error("adam_update: w, g, m, v (and vmax) must have one size");
    gt::AdamScalars sc{b1, b2, eps, weight_decay, decay_factor, step_size, bias2, decoupled};
    py::gil_scoped_release release;
    gt::adam_update(vw.ptr, vg.ptr, vm.ptr, vv.ptr, vx.ptr, size_t(w.size()), dtype, sc);
  }, py::arg("w"), py::arg("g"), py::arg("m"), py::arg("v"), py::arg("vmax"), py::arg("b1"), py::arg("b2"),
     py::arg("eps"), py::arg("weight_decay"), py::arg("decay_factor"), py::arg("step_size"), py::arg("bias2"),
     py::arg("decoupled"),
     "Adam's (decoupled: AdamW's) update of w, m, v (vmax: amsgrad's, or None) in place, one pass, numpy's bits.");

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
}

}  // namespace bindings
}  // namespace gt
