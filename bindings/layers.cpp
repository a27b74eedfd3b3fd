// Bindings of the nn layers' kernels on shaped arrays: LayerNorm by rows, BatchNorm by channels, conv, pooling.
#include <pybind11/stl.h>

#include <array>
#include <string>

#include "../kernels/conv.h"
#include "../kernels/norm.h"
#include "../kernels/softmax.h"
#include "common.h"

namespace gt {
namespace bindings {
namespace {

// BatchNorm's per-channel passes see x as [n, c, hw] (C-contiguous, float32/float64).
gt::DType channel_dtype(const py::array& x, const char* what) {
  gt::DType dtype = float_dtype(x, what);
  if (x.ndim() < 2) throw py::value_error(std::string(what) + " needs x of at least 2 dims [N, C, ...]");
  return dtype;
}

std::array<size_t, 3> nchw(const py::array& x) {
  size_t hw = 1;
  for (py::ssize_t d = 2; d < x.ndim(); ++d) hw *= size_t(x.shape(d));
  return std::array<size_t, 3>{size_t(x.shape(0)), size_t(x.shape(1)), hw};
}

// v's memory, one value per channel: float64 (f64), else in x's dtype.
char* per_channel(const py::array& v, const py::array& x, size_t c, const char* what, bool writable, bool f64) {
  View view = contiguous(v, what, writable);
  bool ok = f64 ? v.dtype().equal(py::dtype::of<double>()) : v.dtype().equal(x.dtype());
  if (!ok || view.nbytes != c * (f64 ? 8 : size_t(x.itemsize())))
    throw py::value_error(std::string(what) + " must hold one value per channel (" + (f64 ? "float64" : "x's dtype") + ")");
  return view.ptr;
}

// Convolution patches: x [n, c, h, w] <-> cols [c, kh, kw, n, oh, ow] (float32/float64).
gt::ConvGeometry conv_geometry(const py::array& x, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
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
}

gt::DType conv_dtype(const py::array& a, const py::array& b) {
  int32_t dtype = dtype_code(a);
  if ((dtype != gt::kF32 && dtype != gt::kF64) || dtype_code(b) != dtype)
    throw py::type_error("conv patches take float32 or float64 arrays of one dtype");
  return gt::DType(dtype);
}

}  // namespace

void bind_layers(py::module_& m) {

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

  m.def("channel_sums", [](py::array s1, py::array s2, py::array x) {
    gt::DType dtype = channel_dtype(x, "channel_sums");
    View vx = contiguous(x, "x", false);
    auto d = nchw(x);
    auto* p1 = reinterpret_cast<double*>(per_channel(s1, x, d[1], "s1", true, true));
    auto* p2 = reinterpret_cast<double*>(per_channel(s2, x, d[1], "s2", true, true));
    py::gil_scoped_release release;
    gt::channel_sums(p1, p2, vx.ptr, d[0], d[1], d[2], dtype);
  }, py::arg("s1"), py::arg("s2"), py::arg("x"), "Per channel (dim 1) of x: the sum and the sum of squares (float64).");
  m.def("channel_affine", [](py::array y, py::array x, py::array a, py::array b) {
    gt::DType dtype = channel_dtype(x, "channel_affine");
    View vy = contiguous(y, "y", true), vx = contiguous(x, "x", false);
    if (!y.dtype().equal(x.dtype()) || vy.nbytes != vx.nbytes) throw py::value_error("y must be like x");
    auto d = nchw(x);
    void* pa = per_channel(a, x, d[1], "a", false, false);
    void* pb = per_channel(b, x, d[1], "b", false, false);
    py::gil_scoped_release release;
    gt::channel_affine(vy.ptr, vx.ptr, pa, pb, d[0], d[1], d[2], dtype);
  }, py::arg("y"), py::arg("x"), py::arg("a"), py::arg("b"), "y = x * a[c] + b[c] per channel (dim 1).");
  m.def("channel_affine_backward", [](py::array dx, py::array sum_g, py::array sum_gx, py::array g, py::array x,
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

  m.def("im2col", [](py::array cols, py::array x, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
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
  m.def("col2im", [](py::array dx, py::array cols, std::array<size_t, 2> kernel, std::array<size_t, 2> stride,
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

  m.def("max_pool", [](py::array out, py::array tap, py::array x, std::array<size_t, 2> kernel,
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
  m.def("max_pool_backward", [](py::array dx, py::array grad, py::array tap, std::array<size_t, 2> kernel,
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

  m.def("softmax_shift", [](py::array scores, bool causal, int64_t first) {
    View vs = contiguous(scores, "scores", true);
    gt::DType dtype = float_dtype(scores, "softmax_shift");
    if (scores.ndim() < 2) throw py::value_error("softmax_shift: scores need 2 dims at least [..., Lq, Lk]");
    size_t lq = size_t(scores.shape(scores.ndim() - 2)), lk = size_t(scores.shape(scores.ndim() - 1));
    size_t rows = vs.nbytes / gt::dtype_size(dtype) / (lk ? lk : 1);
    py::gil_scoped_release release;
    gt::softmax_shift(vs.ptr, lq ? rows / lq : 0, lq, lk, causal, first, dtype);
  }, py::arg("scores"), py::arg("causal"), py::arg("first"),
     "In place over scores [..., Lq, Lk]: -inf at keys j > i + first of row i when causal, then each row minus its max.");
  m.def("softmax_grad", [](py::array ds, py::array rowsum, py::array w) {
    View vd = contiguous(ds, "ds", true), vr = contiguous(rowsum, "rowsum", false), vw = contiguous(w, "w", false);
    gt::DType dtype = float_dtype(ds, "softmax_grad");
    if (ds.ndim() < 1 || !w.dtype().equal(ds.dtype()) || !rowsum.dtype().equal(ds.dtype()) || vw.nbytes != vd.nbytes)
      throw py::value_error("softmax_grad: w like ds, rowsum one value per row of ds, all of one dtype");
    size_t cols = size_t(ds.shape(ds.ndim() - 1)), rows = vr.nbytes / gt::dtype_size(dtype);
    if (rows * cols * gt::dtype_size(dtype) != vd.nbytes) throw py::value_error("softmax_grad: rowsum must hold one value per row");
    py::gil_scoped_release release;
    gt::softmax_grad(vd.ptr, vr.ptr, vw.ptr, rows, cols, dtype);
  }, py::arg("ds"), py::arg("rowsum"), py::arg("w"), "In place: ds = (ds - rowsum[row]) * w.");
}

}  // namespace bindings
}  // namespace gt
