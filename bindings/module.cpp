// The only PYBIND11_MODULE: _native's errors and code tables, then each bindings file's part (argument checks, GIL release).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "../kernels/types.h"
#include "common.h"

using namespace gt::bindings;  // common.h: py, the argument checks, the bind_* of each file

PYBIND11_MODULE(_native, m) {
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
  dtypes.def_property_readonly("complex", [](gt::DType d) { return gt::is_complex(d); },
                               "Whether it is complex: sums reduce it as its float pairs; max/min refuse it.");
  dtypes.def_property_readonly("itemsize", [](gt::DType d) { return gt::dtype_size(d); });
  py::enum_<gt::RedOp> redops(m, "RedOp", "Reduction ops of all_reduce, reduce_scatter and reduce_into.");
  for (int32_t r = 0; r < gt::kNumRedOps; ++r) redops.value(gt::kRedOpNames[r], gt::RedOp(r));
  m.def("dtype_of", [](py::array a) -> py::object {
    int32_t code = dtype_code(a);
    return code < 0 ? py::object(py::none()) : py::cast(gt::DType(code));
  }, py::arg("array"), "The _native.DType of an array's elements (None for a type the kernels do not number).");

  // In this order: every type a signature names is registered before it (the enums above, Node before Group).
  bind_kernels(m);
  bind_layers(m);
  bind_node(m);
  bind_collectives(m);
  bind_ps(m);
  bind_mpi(m);
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
}
