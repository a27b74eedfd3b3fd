// Bindings that call MPI's own Allgather / Allreduce from C++: a small blocking call across hosts without mpi4py's wrapping.
//
// No MPI header is needed: distributed/mpi_direct.py finds the functions in the library mpi4py itself
// loaded and passes them, with mpi4py's handles, as integers. A handle is a 32-bit int (MPICH) or a
// pointer (Open MPI); `handle_bytes` (mpi4py's sizeof of MPI_Comm) picks the prototype the library has.
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/group_segment.h"
#include "common.h"
#include "fastcall.h"
#include "kept.h"

namespace gt {
namespace bindings {
namespace {

template <typename H>
H handle(uintptr_t value) {
  if constexpr (sizeof(H) == 4) return H(uint32_t(value));  // MPICH's int handles (mpi4py gives them unsigned)
  else return reinterpret_cast<H>(value);
}

// The bytes of a C-contiguous array as MPI counts them (int), else ValueError naming `what`.
int count_of(const py::array& a, const char* what, bool writable) {
  View v = contiguous(a, what, writable);
  if (v.nbytes > size_t(INT_MAX)) throw py::value_error(std::string(what) + " is too large for one MPI call");
  return int(v.nbytes);
}

// MPI_Allgather(send, n, BYTE, recv, n, BYTE, comm) on one communicator of `size` members: recv holds
// size * send's bytes; blocking, the GIL released; returns MPI's error code (0: done).
struct MpiAllgather {
  uintptr_t fn, byte, comm;
  int handle_bytes, size;

  template <typename H>
  int call(const void* s, int n, void* r) const {
    using F = int (*)(const void*, int, H, void*, int, H, H);
    return reinterpret_cast<F>(fn)(s, n, handle<H>(byte), r, n, handle<H>(byte), handle<H>(comm));
  }
  int operator()(const py::array& send, py::array& recv) const {
    int n = count_of(send, "all_gather's input", false);
    if (size_t(count_of(recv, "all_gather's output", true)) != size_t(n) * size_t(size))
      throw py::value_error("all_gather's output must hold " + std::to_string(size) + " x the input's bytes");
    const void* s = send.data();
    void* r = recv.mutable_data();
    py::gil_scoped_release nogil;
    return handle_bytes == 4 ? call<int32_t>(s, n, r) : call<void*>(s, n, r);
  }
};

// MPI_Allreduce(send or IN_PLACE, recv, count, dtype, op, comm) of arrays of one numpy type (`type_num`,
// the MPI type `dtype`): in place when send is recv; blocking, the GIL released; returns MPI's error code.
struct MpiAllreduce {
  uintptr_t fn, dtype, op, comm, in_place;
  int handle_bytes, type_num;

  template <typename H>
  int call(const void* s, void* r, int count) const {
    using F = int (*)(const void*, void*, int, H, H, H);
    return reinterpret_cast<F>(fn)(s, r, count, handle<H>(dtype), handle<H>(op), handle<H>(comm));
  }
  int operator()(const py::array& send, py::array& recv) const {
    count_of(recv, "all_reduce's output", true);
    if (recv.dtype().num() != type_num || send.dtype().num() != type_num || send.size() != recv.size())
      throw py::value_error("all_reduce: the input and output must be arrays of the plan's dtype and of one size");
    if (recv.size() > INT_MAX) throw py::value_error("all_reduce's output is too large for one MPI call");
    const void* s = send.ptr() == recv.ptr() ? reinterpret_cast<const void*>(in_place) : send.data();
    if (s != reinterpret_cast<const void*>(in_place)) count_of(send, "all_reduce's input", false);
    void* r = recv.mutable_data();
    int count = int(recv.size());
    py::gil_scoped_release nogil;
    return handle_bytes == 4 ? call<int32_t>(s, r, count) : call<void*>(s, r, count);
  }
};

// call() between setting group.armed to [what, ranks] (a new list per call: mpi_wait's watchdog tells calls
// apart by identity, and ends the process if one lasts past the timeout) and back to None; its result.
template <typename Call>
int armed_call(const py::object& group, const py::str& what, const py::object& ranks, Call call) {
  static PyObject* armed = PyUnicode_InternFromString("armed");
  py::list marker(2);
  marker[0] = what;
  marker[1] = ranks;
  if (PyObject_SetAttr(group.ptr(), armed, marker.ptr()) != 0) throw py::error_already_set();
  int rc;
  try {
    rc = call();
  } catch (...) {
    PyObject_SetAttr(group.ptr(), armed, Py_None);
    throw;
  }
  if (PyObject_SetAttr(group.ptr(), armed, Py_None) != 0) throw py::error_already_set();
  return rc;
}

// InterHostGroup.gather_rows' common case in one C++ call: even shares (`rows`, a list or tuple of ints
// alike on every member) of a C-contiguous x under `max_bytes` of output and `max_share_bytes` a member
// (larger shares go point to point in the Python method), no all_reduce in flight on the
// group; the output is the last one of that layout when nothing else holds it (an allocator's reuse of a
// freed block), else alloc(shape, dtype)'s. Anything else goes to `fallback(x, rows)` (the Python
// method: its checks and errors). group.armed is [what, ranks] during the MPI call (mpi_wait's watchdog).
struct MpiGatherRows {
  MpiAllgather call;
  py::object group, ranks, alloc, fallback, on_error;
  size_t max_bytes, max_share_bytes;
  KeptOutputs kept;
  py::list in_flight;  // group._in_flight (one list for the group's life): all_reduces not yet waited for
  py::str what = py::str("all_gather");

  py::object operator()(py::object xo, py::object rows) {
    if (!py::isinstance<py::array>(xo)) return fallback(xo, rows);
    py::array x = py::reinterpret_borrow<py::array>(xo);
    if (!(x.flags() & py::array::c_style)) x = py::array::ensure(x, py::array::c_style);  // a C-contiguous copy
    if (!x || x.ndim() == 0) return fallback(xo, rows);
    gt::Scratch<int64_t> sizes(size_t(call.size));
    int64_t total = read_rows(rows, call.size, sizes.data());
    int64_t share = total >= 0 && total == sizes[0] * call.size ? sizes[0] : -1;
    for (int i = 1; i < call.size && share >= 0; ++i)
      if (sizes[size_t(i)] != share) share = -1;
    size_t total_bytes = size_t(x.nbytes()) * size_t(call.size);
    if (share < 0 || x.shape(0) != share || total_bytes >= max_bytes || size_t(x.nbytes()) >= max_share_bytes)
      return fallback(xo, rows);
    if (PyList_GET_SIZE(in_flight.ptr()) != 0) return fallback(xo, rows);  // in flight: the method drains them
    py::object out = kept.get(x, total, alloc);
    py::array o = py::reinterpret_borrow<py::array>(out);
    int rc = armed_call(group, what, ranks, [&] { return call(x, o); });
    if (rc != 0) on_error(rc);
    return out;
  }
};

// InterHostGroup.all_reduce's common case in one C++ call: a (redop, dtype) added with its MpiAllreduce
// (both matched by identity: the collectives' RedOp members, numpy's dtype singletons), x and out
// C-contiguous under `max_bytes`, no all_reduce in flight on the group. Anything else goes to
// `fallback(x, out, redop)` (the Python method). group.armed is [what, ranks] during the MPI call.
struct MpiAllreduceFast {
  struct Entry {
    py::object redop, dtype;
    MpiAllreduce call;
  };
  py::object group, ranks, fallback, on_error;
  size_t max_bytes;
  std::vector<Entry> entries;
  py::list in_flight;  // group._in_flight (one list for the group's life): all_reduces not yet waited for
  py::str what = py::str("all_reduce");

  py::object operator()(py::object xo, py::object outo, py::object redop) {
    if (!py::isinstance<py::array>(xo) || !py::isinstance<py::array>(outo)) return fallback(xo, outo, redop);
    py::array x = py::reinterpret_borrow<py::array>(xo), out = py::reinterpret_borrow<py::array>(outo);
    PyObject* dtype = reinterpret_cast<PyObject*>(py::detail::array_proxy(x.ptr())->descr);
    const Entry* found = nullptr;
    for (const Entry& e : entries)
      if (e.redop.ptr() == redop.ptr() && e.dtype.ptr() == dtype) found = &e;
    if (found == nullptr || size_t(x.nbytes()) >= max_bytes || !(x.flags() & py::array::c_style) ||
        !(out.flags() & py::array::c_style) || !out.writeable())
      return fallback(xo, outo, redop);
    if (PyList_GET_SIZE(in_flight.ptr()) != 0) return fallback(xo, outo, redop);  // in flight: the method drains them
    int rc = armed_call(group, what, ranks, [&] { return found->call(x, out); });
    if (rc != 0) on_error(rc);
    return outo;
  }
};

}  // namespace

void bind_mpi(py::module_& m) {
  py::class_<MpiAllgather>(m, "MpiAllgather", "A blocking MPI_Allgather of bytes on one communicator, called from C++.")
      .def(py::init([](uintptr_t fn, int handle_bytes, uintptr_t byte, uintptr_t comm, int size) {
             if (handle_bytes != 4 && handle_bytes != int(sizeof(void*))) throw py::value_error("MPI handles of unknown size");
             return MpiAllgather{fn, byte, comm, handle_bytes, size};
           }),
           py::arg("fn"), py::arg("handle_bytes"), py::arg("byte"), py::arg("comm"), py::arg("size"))
      .def("__call__", &MpiAllgather::operator(), py::arg("send"), py::arg("recv"),
           "send's bytes from every member into recv, in member order; MPI's error code (0: done).");
  fast_call<MpiGatherRows, 2>(py::class_<MpiGatherRows>(m, "MpiGatherRows",
      "InterHostGroup.gather_rows' common case (even shares, small) in one C++ call; else its Python method.")
      .def(py::init([](const MpiAllgather& call, py::object group, py::object ranks, size_t max_bytes, py::object alloc,
                       py::object fallback, py::object on_error, size_t max_share_bytes) {
             py::list in_flight = group.attr("_in_flight");
             return MpiGatherRows{call, group, ranks, alloc, fallback, on_error, max_bytes, max_share_bytes, {}, in_flight};
           }),
           py::arg("call"), py::arg("group"), py::arg("ranks"), py::arg("max_bytes"), py::arg("alloc"),
           py::arg("fallback"), py::arg("on_error"), py::arg("max_share_bytes") = SIZE_MAX)
      .def("__call__", &MpiGatherRows::operator(), py::arg("x"), py::arg("rows"),
           "Every member's x concatenated along axis 0 (rows: every member's length), as gather_rows.")
      .def_property_readonly("kept", [](const MpiGatherRows& g) { return g.kept.size(); },
                             "How many layouts' outputs are kept (at most 16)."));
  fast_call<MpiAllreduceFast, 3>(py::class_<MpiAllreduceFast>(m, "MpiAllreduceFast",
      "InterHostGroup.all_reduce's common case (added (redop, dtype) pairs, small) in one C++ call; else its Python method.")
      .def(py::init([](py::object group, py::object ranks, size_t max_bytes, py::object fallback, py::object on_error) {
             return MpiAllreduceFast{group, ranks, fallback, on_error, max_bytes, {}, group.attr("_in_flight")};
           }),
           py::arg("group"), py::arg("ranks"), py::arg("max_bytes"), py::arg("fallback"), py::arg("on_error"))
      .def("add", [](MpiAllreduceFast& f, py::object redop, py::object dtype, const MpiAllreduce& call) {
             for (auto& e : f.entries)
               if (e.redop.is(redop) && e.dtype.is(dtype)) return;
             f.entries.push_back({redop, dtype, call});
           }, py::arg("redop"), py::arg("dtype"), py::arg("call"), "Take (redop, dtype) with this call from now on.")
      .def("__call__", &MpiAllreduceFast::operator(), py::arg("x"), py::arg("out"), py::arg("redop"),
           "out = x reduced over the members with redop (in place when out is x), as InterHostGroup.all_reduce.")
      .def_property_readonly("size", [](const MpiAllreduceFast& f) { return f.entries.size(); },
                             "How many (redop, dtype) pairs it takes."));
  py::class_<MpiAllreduce>(m, "MpiAllreduce", "A blocking MPI_Allreduce of one dtype and op on one communicator, from C++.")
      .def(py::init([](uintptr_t fn, int handle_bytes, uintptr_t dtype, uintptr_t op, uintptr_t comm, uintptr_t in_place,
                       int type_num) {
             if (handle_bytes != 4 && handle_bytes != int(sizeof(void*))) throw py::value_error("MPI handles of unknown size");
             return MpiAllreduce{fn, dtype, op, comm, in_place, handle_bytes, type_num};
           }),
           py::arg("fn"), py::arg("handle_bytes"), py::arg("dtype"), py::arg("op"), py::arg("comm"), py::arg("in_place"),
           py::arg("type_num"))
      .def("__call__", &MpiAllreduce::operator(), py::arg("send"), py::arg("recv"),
           "recv = send reduced over the members (in place when send is recv); MPI's error code (0: done).");
}

}  // namespace bindings
}  // namespace gt
