// Bindings of the parameter server's kernels: the id -> row map (ps/_idindex.py) and the row kernels (ps_rows.h).
#include "../kernels/ps_index.h"
#include "../kernels/ps_rows.h"
#include "common.h"

namespace gt {
namespace bindings {
namespace {

using I64 = py::array_t<int64_t, py::array::c_style>;
using F32 = py::array_t<float, py::array::c_style>;

F32 checked_f32(const py::array& a, const char* what, bool writable) {
  if (!py::isinstance<F32>(a) || a.ndim() != 2)
    throw py::type_error(std::string("ps rows: ") + what + " must be a 2-D C-contiguous float32 array");
  if (writable && !a.writeable()) throw py::value_error(std::string("ps rows: ") + what + " must be writable");
  return py::reinterpret_borrow<F32>(a);
}

// The slot arrays' length, checked: equal lengths, a power of two, and writable where asked.
size_t slot_count(const I64& slot_ids, const I64& slot_rows) {
  size_t n = size_t(slot_rows.size());
  if (size_t(slot_ids.size()) != n || n == 0 || (n & (n - 1)) != 0)
    throw py::value_error("ps index: slot_ids and slot_rows must have one power-of-two length");
  return n;
}

I64 checked(const py::array& a, const char* what) {
  if (!py::isinstance<I64>(a)) throw py::type_error(std::string("ps index: ") + what + " must be C-contiguous int64");
  return py::reinterpret_borrow<I64>(a);
}

}  // namespace

void bind_ps(py::module_& m) {
  m.def("ps_index_lookup", [](py::array slot_ids_a, py::array slot_rows_a, uint64_t salt, uint32_t shift,
                              py::array ids_a, py::array out_a) {
    I64 slot_ids = checked(slot_ids_a, "slot_ids"), slot_rows = checked(slot_rows_a, "slot_rows");
    I64 ids = checked(ids_a, "ids"), out = checked(out_a, "out");
    size_t n_slots = slot_count(slot_ids, slot_rows);
    if (out.size() != ids.size()) throw py::value_error("ps_index_lookup: out must have the length of ids");
    if (!out.writeable()) throw py::value_error("ps_index_lookup: out must be writable");
    const int64_t *si = slot_ids.data(), *sr = slot_rows.data(), *pi = ids.data();
    int64_t* po = out.mutable_data();
    size_t n = size_t(ids.size());
    py::gil_scoped_release release;
    gt::ps_index_lookup(si, sr, n_slots, salt, shift, pi, n, po);
  }, py::arg("slot_ids"), py::arg("slot_rows"), py::arg("salt"), py::arg("shift"), py::arg("ids"), py::arg("out"),
     "out[i] = the row of ids[i] in the slot arrays (-1: absent); the home slot is splitmix64(id ^ salt) >> shift.");

  m.def("ps_index_place", [](py::array slot_ids_a, py::array slot_rows_a, uint64_t salt, uint32_t shift,
                             py::array ids_a, py::array rows_a) {
    I64 slot_ids = checked(slot_ids_a, "slot_ids"), slot_rows = checked(slot_rows_a, "slot_rows");
    I64 ids = checked(ids_a, "ids"), rows = checked(rows_a, "rows");
    size_t n_slots = slot_count(slot_ids, slot_rows);
    if (rows.size() != ids.size()) throw py::value_error("ps_index_place: rows must have the length of ids");
    if (!slot_ids.writeable() || !slot_rows.writeable())
      throw py::value_error("ps_index_place: the slot arrays must be writable");
    if (2 * size_t(ids.size()) > n_slots) throw py::value_error("ps_index_place: more ids than half the slots");
    int64_t *si = slot_ids.mutable_data(), *sr = slot_rows.mutable_data();
    const int64_t *pi = ids.data(), *pr = rows.data();
    size_t n = size_t(ids.size()), placed;
    {
      py::gil_scoped_release release;
      placed = gt::ps_index_place(si, sr, n_slots, salt, shift, pi, pr, n);
    }
    if (placed < n) throw py::value_error("ps_index_place: the slots are full");
  }, py::arg("slot_ids"), py::arg("slot_rows"), py::arg("salt"), py::arg("shift"), py::arg("ids"), py::arg("rows"),
     "Puts (ids[i], rows[i]) into the first free slot from each id's home (ids absent and distinct; the caller "
     "keeps the slots at most half full).");

  m.def("ps_uniform_rows", [](py::array ids_a, uint64_t table_key, float scale, float lo, py::array out_a) {
    if (!py::isinstance<I64>(ids_a)) throw py::type_error("ps_uniform_rows: ids must be C-contiguous int64");
    I64 ids = py::reinterpret_borrow<I64>(ids_a);
    F32 out = checked_f32(out_a, "out", true);
    if (out.shape(0) != ids.size()) throw py::value_error("ps_uniform_rows: out must have one row per id");
    const int64_t* pi = ids.data();
    float* po = out.mutable_data();
    size_t n = size_t(ids.size()), dim = size_t(out.shape(1));
    py::gil_scoped_release release;
    gt::ps_uniform_rows(pi, n, table_key, dim, scale, lo, po);
  }, py::arg("ids"), py::arg("table_key"), py::arg("scale"), py::arg("lo"), py::arg("out"),
     "out[i] = lo + scale * u: the seeded uniform row of ids[i] under table_key (ps/init.py's seeded_rows).");

  m.def("ps_sgd_rows", [](py::array store_a, py::array rows_a, py::array grads_a, float lr) {
    F32 store = checked_f32(store_a, "store", true), grads = checked_f32(grads_a, "grads", false);
    if (!py::isinstance<I64>(rows_a)) throw py::type_error("ps_sgd_rows: rows must be C-contiguous int64");
    I64 rows = py::reinterpret_borrow<I64>(rows_a);
    if (grads.shape(0) != rows.size() || grads.shape(1) > store.shape(1))
      throw py::value_error("ps_sgd_rows: grads must be (len(rows), dim) with dim <= the store's columns");
    const int64_t* pr = rows.data();
    const int64_t n_rows = int64_t(store.shape(0));
    for (py::ssize_t i = 0; i < rows.size(); ++i)
      if (pr[i] < 0 || pr[i] >= n_rows) throw py::value_error("ps_sgd_rows: a row outside the store");
    float* ps = store.mutable_data();
    const float* pg = grads.data();
    size_t n = size_t(rows.size()), stride = size_t(store.shape(1)), dim = size_t(grads.shape(1));
    py::gil_scoped_release release;
    gt::ps_sgd_rows(ps, stride, pr, n, pg, dim, lr);
  }, py::arg("store"), py::arg("rows"), py::arg("grads"), py::arg("lr"),
     "store[rows[i], :dim] -= lr * grads[i] (float32, numpy's rounding; rows distinct).");

  m.def("ps_add_rows", [](py::array out_a, py::array index_a, py::array rows_a) {
    F32 out = checked_f32(out_a, "out", true), rows = checked_f32(rows_a, "rows", false);
    if (!py::isinstance<I64>(index_a)) throw py::type_error("ps_add_rows: index must be C-contiguous int64");
    I64 index = py::reinterpret_borrow<I64>(index_a);
    if (rows.shape(0) != index.size() || rows.shape(1) != out.shape(1))
      throw py::value_error("ps_add_rows: rows must be (len(index), out's columns)");
    const int64_t* pi = index.data();
    const int64_t n_out = int64_t(out.shape(0));
    for (py::ssize_t i = 0; i < index.size(); ++i)
      if (pi[i] < 0 || pi[i] >= n_out) throw py::value_error("ps_add_rows: an index outside out");
    float* po = out.mutable_data();
    const float* pr = rows.data();
    size_t n = size_t(index.size()), dim = size_t(out.shape(1));
    py::gil_scoped_release release;
    gt::ps_add_rows(po, pi, n, pr, dim);
  }, py::arg("out"), py::arg("index"), py::arg("rows"),
     "out[index[i]] += rows[i], in order (np.add.at's bits).");
}

}  // namespace bindings
}  // namespace gt
