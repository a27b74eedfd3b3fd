// The shared argument checks of the bindings (see common.h): contiguity, and dtypes read from numpy arrays.
#include "common.h"

namespace gt {
namespace bindings {

View contiguous(const py::array& a, const char* what, bool writable) {
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + " must be C-contiguous");
  if (writable && !a.writeable()) throw py::value_error(std::string(what) + " must be writable");
  return View{static_cast<char*>(const_cast<void*>(a.data())), size_t(a.nbytes())};
}

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
    case 'c': return size == 8 ? gt::kC64 : size == 16 ? gt::kC128 : -1;
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

gt::DType arithmetic_dtype(const py::array& a, const char* what) {
  int32_t code = dtype_code(a);
  if (gt::is_arithmetic(code)) return gt::DType(code);
  std::string supported;
  for (int32_t d = 0; d < gt::kNumDTypes; ++d)
    if (gt::is_arithmetic(d)) supported += std::string(supported.empty() ? "" : ", ") + gt::dtype_name(d);
  throw py::type_error(std::string(what) + " dtype " + dtype_text(a) + "; supported: " + supported);
}

gt::DType reduction_dtype(const py::array& a, gt::RedOp redop, const char* what) {
  int32_t code = dtype_code(a);
  if (!gt::is_complex(code)) return arithmetic_dtype(a, what);
  if (redop != gt::kSum)
    throw py::type_error(std::string(what) + " dtype " + gt::dtype_name(code) + " with " + gt::redop_name(redop) +
                         ": complex numbers are not ordered (only sum reduces them)");
  return gt::DType(gt::summed_as(code));
}

gt::DType float_dtype(const py::array& x, const char* what) {
  int32_t code = dtype_code(x);
  if (code != gt::kF32 && code != gt::kF64) throw py::type_error(std::string(what) + " takes float32 or float64 arrays");
  return gt::DType(code);
}

}  // namespace bindings
}  // namespace gt
