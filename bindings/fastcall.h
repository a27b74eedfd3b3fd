// Instances of a bound C++ functor called from Python through the type's own tp_call, not pybind11's dispatcher.
#pragma once
#include <cstddef>
#include <utility>

#include "common.h"

namespace gt {
namespace bindings {

// The small collectives' C++ fronts (GatherRows, BroadcastCall, MpiGatherRows, ...) take about 1 us a call, and
// calling a pybind11 object spends a few hundred ns of it before operator() runs (the type's __call__ looked up,
// a bound method made, the dispatcher casting every argument). fast_call<T, N>(cls), after every .def of cls
// (a later setattr on the type would reset the slot), makes cls's instances callable with N positional
// arguments straight into T::operator()(py::object...): the instance's value read as pybind11 stores it, errors
// translated as the dispatcher does. __call__, when defined, stays in the type's dict for help() and works alike.
template <typename T, size_t N>
struct FastCall {
  template <size_t... I>
  static py::object invoke(T& target, PyObject* args, std::index_sequence<I...>) {
    return target(py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(args, I))...);
  }

  static PyObject* call(PyObject* self, PyObject* args, PyObject* kwargs) {
    if ((kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != Py_ssize_t(N)) {
      PyErr_Format(PyExc_TypeError, "%s() takes %d positional arguments", Py_TYPE(self)->tp_name, int(N));
      return nullptr;
    }
    void* value = reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().value_ptr();
    if (value == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s was not initialised", Py_TYPE(self)->tp_name);
      return nullptr;
    }
    try {
      return invoke(*static_cast<T*>(value), args, std::make_index_sequence<N>{}).release().ptr();
    } catch (py::error_already_set& e) {
      e.restore();
      return nullptr;
    } catch (...) {
      py::detail::try_translate_exceptions();
      return nullptr;
    }
  }
};

template <typename T, size_t N>
void fast_call(const py::handle& cls) {
  reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_call = &FastCall<T, N>::call;
}

}  // namespace bindings
}  // namespace gt
