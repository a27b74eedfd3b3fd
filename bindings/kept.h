// Kept outputs of the small gathers called from C++ (GatherRows, MpiGatherRows): written again once nothing else holds them.
#pragma once
#include <utility>
#include <vector>

#include "common.h"

namespace gt {
namespace bindings {

// The outputs of up to 16 layouts (dtype, shape): a call gets its layout's last output when only this
// keeper holds it (no name, view or container: what the caller dropped, as a caching allocator reuses a
// freed block), else a new one from alloc(shape, dtype), kept in its place.
class KeptOutputs {
 public:
  static constexpr size_t kKept = 16;

  // The output of x's layout with `rows` along axis 0 (x's other dims, x's dtype).
  py::object get(const py::array& x, int64_t rows, const py::object& alloc) {
    PyObject* dtype = reinterpret_cast<PyObject*>(py::detail::array_proxy(x.ptr())->descr);
    for (Kept& k : kept_) {
      if (!fits(k, x, dtype, rows)) continue;
      if (Py_REFCNT(k.out.ptr()) == 1) return k.out;
      k.out = alloc(shape(x, rows), py::handle(dtype));
      return k.out;
    }
    py::object out = alloc(shape(x, rows), py::handle(dtype));
    std::vector<py::ssize_t> dims(x.shape(), x.shape() + x.ndim());
    dims[0] = py::ssize_t(rows);
    Kept entry{py::reinterpret_borrow<py::object>(dtype), std::move(dims), out};
    if (kept_.size() < kKept) kept_.push_back(std::move(entry));
    else kept_[next_++ % kKept] = std::move(entry);
    return out;
  }
  size_t size() const { return kept_.size(); }

 private:
  struct Kept {
    py::object dtype;
    std::vector<py::ssize_t> shape;
    py::object out;
  };
  std::vector<Kept> kept_;
  size_t next_ = 0;  // the entry a new layout replaces once full (round robin)

  static py::tuple shape(const py::array& x, int64_t rows) {
    py::tuple t(x.ndim());
    for (py::ssize_t i = 0; i < x.ndim(); ++i) t[i] = py::int_(i == 0 ? py::ssize_t(rows) : x.shape(i));
    return t;
  }
  static bool fits(const Kept& k, const py::array& x, PyObject* dtype, int64_t rows) {
    if (py::ssize_t(k.shape.size()) != x.ndim() || k.shape[0] != rows) return false;
    for (py::ssize_t i = 1; i < x.ndim(); ++i)
      if (k.shape[size_t(i)] != x.shape(i)) return false;
    return k.dtype.ptr() == dtype || PyObject_RichCompareBool(k.dtype.ptr(), dtype, Py_EQ) == 1;
  }
};

// The members' lengths along axis 0 (a list, tuple or other sequence of k non-negative ints) into
// `rows`, and their sum; -1 when they are not (the Python path then raises its error).
inline int64_t read_rows(const py::handle& sizes, int k, int64_t* rows) {
  if (!PySequence_Check(sizes.ptr())) return -1;  // an iterator is left unread for the Python path
  PyObject* seq = PySequence_Fast(sizes.ptr(), "sizes");  // the list or tuple itself (new reference)
  if (seq == nullptr) {
    PyErr_Clear();
    return -1;
  }
  int64_t total = PySequence_Fast_GET_SIZE(seq) == Py_ssize_t(k) ? 0 : -1;
  for (Py_ssize_t i = 0; i < k && total >= 0; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    PyObject* index = PyLong_CheckExact(item) ? (Py_INCREF(item), item) : PyNumber_Index(item);
    if (index == nullptr) {
      PyErr_Clear();
      total = -1;
      break;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (overflow || v < 0 || v > (int64_t(1) << 40)) total = -1;
    else total += (rows[i] = v);
  }
  Py_DECREF(seq);
  return total;
}

}  // namespace bindings
}  // namespace gt
