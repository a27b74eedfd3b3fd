// What every bindings file shares: numpy array checks, dtypes read from arrays, and each file's bind_* entry.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../kernels/types.h"

namespace py = pybind11;

namespace gt {
namespace bindings {

// An array's memory as the kernels take it.
struct View {
  char* ptr;
  size_t nbytes;
};

// The array's memory, else ValueError "<what> must be C-contiguous" (or "must be writable").
View contiguous(const py::array& a, const char* what, bool writable);

// The gt::DType of an array's elements (ml_dtypes' bfloat16 included), or -1 for a type
// kernels/types.h does not number, or bytes not in this machine's order.
int32_t dtype_code(const py::array& a);

// The dtype's name in errors: kernels/types.h's, else numpy's.
std::string dtype_text(const py::array& a);

// The arithmetic dtype of `a` (kernels/types.h's is_arithmetic), else TypeError:
// "<what> dtype bool; supported: float32, ...".
gt::DType arithmetic_dtype(const py::array& a, const char* what);

// The dtype a reduction of `a` by `redop` runs in: arithmetic_dtype, except that complex arrays are
// summed as their float pairs (kernels/types.h's summed_as); MAX/MIN of complex: TypeError.
gt::DType reduction_dtype(const py::array& a, gt::RedOp redop, const char* what);

// x's dtype, float32 or float64, else TypeError "<what> takes float32 or float64 arrays".
gt::DType float_dtype(const py::array& x, const char* what);

// Each adds its part of _native to m. module.cpp calls them in an order where every type a signature
// names is registered first (pybind11 writes an unregistered type's C++ name into the docstring).
void bind_kernels(py::module_& m);      // kernels.cpp: reductions, copies, erf/GELU, axpby, Philox
void bind_layers(py::module_& m);       // layers.cpp: LayerNorm, BatchNorm's channel passes, conv patches, pooling
void bind_node(py::module_& m);         // node.cpp: Node, ShmBuffer, numpy's arena allocator
void bind_collectives(py::module_& m);  // collectives.cpp: Group and Work (needs Node)
void bind_ps(py::module_& m);           // ps.cpp: the parameter server's id -> row map and row kernels
void bind_mpi(py::module_& m);          // mpi.cpp: MPI's Allgather / Allreduce called from C++ (MpiAllgather, MpiAllreduce)
void bind_cuda(py::module_& m);         // cuda.cpp: the _native.cuda submodule (only with GLOBALTENSOR_WITH_CUDA)

}  // namespace bindings
}  // namespace gt
