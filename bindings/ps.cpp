// Bindings of the parameter server's kernels: the id -> row map over its numpy slot arrays (globaltensor/ps/_idindex.py).
#include "../kernels/ps_index.h"
#include "common.h"

namespace gt {
namespace bindings {
namespace {

using I64 = py::array_t<int64_t, py::array::c_style>;

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
}

}  // namespace bindings
}  // namespace gt
