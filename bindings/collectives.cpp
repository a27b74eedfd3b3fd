// Bindings of the collectives: Group (ranks on one node and their collectives), Work (an async one's completion).
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/group.h"
#include "../kernels/group_segment.h"
#include "common.h"
#include "fastcall.h"
#include "kept.h"

namespace gt {
namespace bindings {
namespace {

// all_to_all's per-member byte counts, read into `out` and checked: one per member, none negative.
// Read straight from the sequence: a small call's path builds no vector.
void byte_counts(const py::sequence& counts, int k, const char* what, uint64_t* out) {
  if (int(py::len(counts)) != k)
    throw py::value_error(std::string(what) + " needs one entry per group member (" + std::to_string(k) + ")");
  for (int i = 0; i < k; ++i) {
    int64_t c = counts[size_t(i)].cast<int64_t>();
    if (c < 0) throw py::value_error(std::string(what) + " must not be negative");
    out[i] = uint64_t(c);
  }
}

// The dtype the reduction runs in, from `in` (out must match): what every reducing binding takes.
// A complex array is reduced as its float pairs (reduction_dtype), so counts are of those floats.
gt::DType reduce_dtype(const py::array& in, const py::array& out, gt::RedOp redop, const char* what) {
  int32_t code = dtype_code(in);  // the common case first: no message built on a small call's path
  if (gt::is_arithmetic(code) && dtype_code(out) == code) return gt::DType(code);
  gt::DType dtype = reduction_dtype(in, redop, (std::string(what) + ": cannot reduce").c_str());
  if (dtype_code(out) != dtype_code(in))
    throw py::type_error(std::string(what) + ": the output's dtype (" + dtype_text(out) + ") differs from the input's (" +
                         dtype_text(in) + ")");
  return dtype;
}

// xo as a C-contiguous array of at least one dimension (a copy when strided), else a null handle: the
// caller's Python way then takes it, with its errors.
py::array rows_input(const py::object& xo) {
  py::array none = py::reinterpret_steal<py::array>(py::handle());  // no numpy call: a small call's path
  if (!py::isinstance<py::array>(xo)) return none;
  py::array x = py::reinterpret_borrow<py::array>(xo);
  if (!(x.flags() & py::array::c_style)) x = py::array::ensure(x, py::array::c_style);
  return x && x.ndim() > 0 ? x : none;
}

// The _native.RedOp named `op` (a str) in `ops`, or nullptr.
const gt::RedOp* find_op(const std::vector<std::pair<py::object, gt::RedOp>>& ops, const py::object& op) {
  for (const auto& [name, r] : ops)
    if (name.is(op) || (PyUnicode_Check(op.ptr()) && PyUnicode_Compare(name.ptr(), op.ptr()) == 0)) return &r;
  return nullptr;
}

// The ops table of ScatterRows / AllReduceCall from collectives.py's {name: _native.RedOp}.
std::vector<std::pair<py::object, gt::RedOp>> op_table(const py::dict& ops) {
  std::vector<std::pair<py::object, gt::RedOp>> table;
  for (auto item : ops) table.emplace_back(py::reinterpret_borrow<py::object>(item.first), item.second.cast<gt::RedOp>());
  return table;
}

// collectives.all_reduce(x, op) of the world on one host, in place, in one C++ call: op one of `ops`, x a writable
// C-contiguous array of an arithmetic dtype; anything else goes to fallback(x, op, world) (collectives.py's way).
struct AllReduceCall {
  std::shared_ptr<Group> group;
  py::object fallback, world;
  std::vector<std::pair<py::object, gt::RedOp>> ops;

  py::object operator()(py::object xo, py::object op) {
    const gt::RedOp* redop = find_op(ops, op);
    if (redop != nullptr && py::isinstance<py::array>(xo)) {
      py::array x = py::reinterpret_borrow<py::array>(xo);
      int32_t dtype = dtype_code(x);
      if (gt::is_arithmetic(dtype) && (x.flags() & py::array::c_style) && x.writeable()) {
        char* p = static_cast<char*>(x.mutable_data());
        size_t count = size_t(x.nbytes()) / gt::dtype_size(dtype);
        py::gil_scoped_release r;
        group->all_reduce(p, p, count, dtype, *redop);
        return xo;
      }
    }
    return fallback(xo, op, world);
  }
};

// g.broadcast with the GIL released only where it may wait (a posted broadcast whose slot or message is
// ready returns at once: releasing and taking the GIL again would cost more than the call).
void broadcast_gil(Group& g, void* p, size_t nbytes, int root) {
  if (g.broadcast_now(nbytes, root)) return g.broadcast(p, nbytes, root);
  py::gil_scoped_release r;
  g.broadcast(p, nbytes, root);
}

// collectives.broadcast(x, src) of the world on one host in one C++ call: x a writable C-contiguous array, src an
// int member (the world's member i is global rank i); anything else goes to fallback(x, src, world).
struct BroadcastCall {
  std::shared_ptr<Group> group;
  py::object fallback, world;

  py::object operator()(py::object xo, py::object src) {
    if (py::isinstance<py::array>(xo) && PyLong_CheckExact(src.ptr())) {
      py::array x = py::reinterpret_borrow<py::array>(xo);
      int overflow = 0;
      long long root = PyLong_AsLongLongAndOverflow(src.ptr(), &overflow);
      if (!overflow && root >= 0 && root < group->size() && (x.flags() & py::array::c_style) && x.writeable()) {
        broadcast_gil(*group, x.mutable_data(), size_t(x.nbytes()), int(root));
        return xo;
      }
    }
    return fallback(xo, src, world);
  }
};

// The elements of one row of x along axis 0 (the product of its other dims).
size_t row_elements(const py::array& x) {
  size_t n = 1;
  for (py::ssize_t d = 1; d < x.ndim(); ++d) n *= size_t(x.shape(d));
  return n;
}

// collectives.all_gather(x, sizes=...) on a group of one host in one C++ call: `sizes` (alike on every member)
// give the output's rows; an output under max_bytes is its layout's kept one (kept.h) and the group's
// all_gather fills it. Anything else (a larger output, a 0-d x, not an array, sizes not k ints) goes to
// fallback(x, sizes), collectives.py's own way.
struct GatherRows {
  std::shared_ptr<Group> group;
  size_t max_bytes;
  py::object fallback, alloc;
  KeptOutputs kept;

  py::object operator()(py::object xo, py::object sizes) {
    py::array x = rows_input(xo);
    if (!x) return fallback(xo, sizes);
    Group& g = *group;
    gt::Scratch<int64_t> rows(size_t(g.size()));
    int64_t total = read_rows(sizes, g.size(), rows.data());
    size_t row_bytes = row_elements(x) * size_t(x.itemsize());
    if (total < 0 || size_t(total) * row_bytes >= max_bytes) return fallback(xo, sizes);
    py::object out = kept.get(x, total, alloc);
    View i = contiguous(x, "input", false), o = contiguous(py::reinterpret_borrow<py::array>(out), "output", true);
    {
      py::gil_scoped_release r;
      g.all_gather(i.ptr, i.nbytes, o.ptr, o.nbytes);
    }
    return out;
  }
};

// collectives.all_to_all(x, send_sizes, recv_sizes=...) on a group of one host in one C++ call, as GatherRows:
// an output under max_bytes is its layout's kept one. Anything else (recv_sizes None, send sizes that do not
// add up to x's rows, a larger output) goes to fallback(x, send_sizes, recv_sizes).
struct AllToAllRows {
  std::shared_ptr<Group> group;
  size_t max_bytes;
  py::object fallback, alloc;
  KeptOutputs kept;

  py::object operator()(py::object xo, py::object send_sizes, py::object recv_sizes) {
    py::array x = rows_input(xo);
    if (!x) return fallback(xo, send_sizes, recv_sizes);
    Group& g = *group;
    size_t k = size_t(g.size());
    gt::Scratch<int64_t> send(k), recv(k);
    int64_t sent = read_rows(send_sizes, g.size(), send.data());
    int64_t got = sent == int64_t(x.shape(0)) ? read_rows(recv_sizes, g.size(), recv.data()) : -1;
    size_t row_bytes = row_elements(x) * size_t(x.itemsize());
    if (got < 0 || size_t(got) * row_bytes >= max_bytes) return fallback(xo, send_sizes, recv_sizes);
    gt::Scratch<uint64_t> send_bytes(k), recv_bytes(k);
    for (size_t q = 0; q < k; ++q) {
      send_bytes[q] = uint64_t(send[q]) * row_bytes;
      recv_bytes[q] = uint64_t(recv[q]) * row_bytes;
    }
    py::object out = kept.get(x, got, alloc);
    View i = contiguous(x, "input", false), o = contiguous(py::reinterpret_borrow<py::array>(out), "output", true);
    {
      py::gil_scoped_release r;
      g.all_to_all(i.ptr, send_bytes.data(), o.ptr, recv_bytes.data());
    }
    return out;
  }
};

// collectives.reduce_scatter(x, op, sizes=...) of the world on one host in one C++ call, as GatherRows: op one of
// `ops` (name -> _native.RedOp), x of an arithmetic dtype, sizes None (the balanced split) or k lengths adding up
// to x's rows; an output under max_bytes is its layout's kept one. Anything else goes to
// fallback(x, op, group, sizes) with the world's Group (collectives.py's own way: its checks and errors).
struct ScatterRows {
  std::shared_ptr<Group> group;
  size_t max_bytes;
  py::object fallback, world, alloc;
  std::vector<std::pair<py::object, gt::RedOp>> ops;
  KeptOutputs kept;

  py::object operator()(py::object xo, py::object op, py::object sizes) {
    const gt::RedOp* redop = find_op(ops, op);
    if (redop == nullptr) return fallback(xo, op, world, sizes);
    py::array x = rows_input(xo);
    int32_t dtype = x ? dtype_code(x) : -1;
    if (!gt::is_arithmetic(dtype)) return fallback(xo, op, world, sizes);
    Group& g = *group;
    size_t k = size_t(g.size());
    gt::Scratch<int64_t> rows(k);
    int64_t total = int64_t(x.shape(0));
    if (sizes.is_none()) {
      for (size_t q = 0; q < k; ++q) rows[q] = total / int64_t(k) + (int64_t(q) < total % int64_t(k) ? 1 : 0);
    } else if (read_rows(sizes, g.size(), rows.data()) != total) {
      return fallback(xo, op, world, sizes);
    }
    size_t row_count = row_elements(x);
    int64_t mine = rows[size_t(g.index())];
    if (size_t(mine) * row_count * size_t(x.itemsize()) >= max_bytes) return fallback(xo, op, world, sizes);
    py::object out = kept.get(x, mine, alloc);
    View i = contiguous(x, "input", false), o = contiguous(py::reinterpret_borrow<py::array>(out), "output", true);
    {
      py::gil_scoped_release r;
      g.reduce_scatter(i.ptr, size_t(total) * row_count, o.ptr, size_t(mine) * row_count, dtype, *redop);
    }
    return out;
  }
};

}  // namespace

void bind_collectives(py::module_& m) {
  m.def("collective_hint", [] { return std::string(gt::collective_hint()); },
        "The advice every error about ranks that did not meet in a collective ends with.");

  py::class_<gt::Work, std::shared_ptr<gt::Work>>(m, "Work", "Completion of one asynchronous collective.")
      .def("wait", [](gt::Work& w) { py::gil_scoped_release r; w.wait(); },
           "Block until it ran; raises its error (CollectiveTimeoutError, ...).")
      .def("done", &gt::Work::done);

  py::class_<Group, std::shared_ptr<Group>>(m, "Group", "A group of ranks on one node and its collectives.")
      .def(py::init([](std::shared_ptr<Node> node, const std::string& name, std::vector<int> ranks, int index,
                       double timeout, size_t stage_bytes, size_t oneshot_bytes, size_t nontemporal_bytes,
                       double deadlock_s) {
        gt::GroupOptions o;
        o.timeout_s = timeout;
        o.deadlock_s = deadlock_s;
        o.stage_bytes = stage_bytes;
        o.oneshot_bytes = oneshot_bytes;
        o.nontemporal_bytes = nontemporal_bytes;
        return std::make_shared<Group>(node, name, ranks, index, o);
      }), py::arg("node"), py::arg("name"), py::arg("ranks"), py::arg("index"), py::arg("timeout"),
          py::arg("stage_bytes"), py::arg("oneshot_bytes"), py::arg("nontemporal_bytes"), py::arg("deadlock_s") = 2.0)
      .def("barrier", [](Group& g) { py::gil_scoped_release r; g.barrier(); })
      .def("broadcast", [](Group& g, py::array buf, int root) {
        View v = contiguous(buf, "buffer", true);
        broadcast_gil(g, v.ptr, v.nbytes, root);
      }, py::arg("buf"), py::arg("root"), "Copy member root's buf into every member's; a small one is posted.")
      .def("transfer", [](Group& g, py::array buf, int root) {
        View v = contiguous(buf, "buffer", true);
        py::gil_scoped_release r;
        g.transfer(v.ptr, v.nbytes, root);
      }, py::arg("buf"), py::arg("root"), "A broadcast that meets at phases at every size (send/recv: a rendezvous).")
      .def("all_gather", [](Group& g, py::array in, py::array out) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        py::gil_scoped_release r;
        g.all_gather(i.ptr, i.nbytes, o.ptr, o.nbytes);
      }, py::arg("input"), py::arg("output"))
      .def("all_gather_async", [](Group& g, py::array in, py::array out) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        return g.all_gather_async(i.ptr, i.nbytes, o.ptr, o.nbytes);
      }, py::arg("input"), py::arg("output"),
         "all_gather on the group's worker thread; the caller keeps the arrays alive until wait().")
      .def("reduce_scatter", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, redop, "reduce_scatter");
        size_t esz = gt::dtype_size(dtype);
        py::gil_scoped_release r;
        g.reduce_scatter(i.ptr, i.nbytes / esz, o.ptr, o.nbytes / esz, dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"), "Reduce (a _native.RedOp) in the input's dtype.")
      .def("all_reduce", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, redop, "all_reduce");
        if (i.nbytes != o.nbytes) throw py::value_error("all_reduce input and output differ in size");
        py::gil_scoped_release r;
        g.all_reduce(i.ptr, o.ptr, i.nbytes / gt::dtype_size(dtype), dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"), "Reduce (a _native.RedOp) in the input's dtype.")
      .def("all_reduce_async", [](Group& g, py::array in, py::array out, gt::RedOp redop) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        gt::DType dtype = reduce_dtype(in, out, redop, "all_reduce_async");
        if (i.nbytes != o.nbytes) throw py::value_error("all_reduce input and output differ in size");
        return g.all_reduce_async(i.ptr, o.ptr, i.nbytes / gt::dtype_size(dtype), dtype, redop);
      }, py::arg("input"), py::arg("output"), py::arg("redop"),
         "all_reduce on the group's worker thread; the caller keeps the arrays alive until wait().")
      .def("drain", [](Group& g) { py::gil_scoped_release r; g.drain(); },
           "Wait until the queued asynchronous ops have run.")
      .def("all_to_all", [](Group& g, py::array in, py::sequence send, py::array out, py::sequence recv) {
        View i = contiguous(in, "input", false), o = contiguous(out, "output", true);
        size_t k = size_t(g.size());
        gt::Scratch<uint64_t> s(k), rc(k);
        byte_counts(send, g.size(), "send_bytes", s.data());
        byte_counts(recv, g.size(), "recv_bytes", rc.data());
        uint64_t ts = 0, tr = 0;
        for (size_t q = 0; q < k; ++q) {
          ts += s[q];
          tr += rc[q];
        }
        if (ts != i.nbytes || tr != o.nbytes) throw py::value_error("all_to_all byte counts do not match the buffers");
        py::gil_scoped_release r;
        g.all_to_all(i.ptr, s.data(), o.ptr, rc.data());
      }, py::arg("input"), py::arg("send_bytes"), py::arg("output"), py::arg("recv_bytes"))
      .def_property("timeout", &Group::timeout, &Group::set_timeout)
      .def_property_readonly("size", &Group::size)
      .def_property_readonly("pushed", &Group::pushed,
                             "Collectives written straight into every member's arena output: all_gathers / all_to_alls of private "
                             "inputs, broadcasts of arena messages shared by every member (push.cpp).")
      .def_property_readonly("index", &Group::index)
      .def_property_readonly("ranks", &Group::ranks);

  fast_call<GatherRows, 2>(py::class_<GatherRows>(m, "GatherRows", "collectives.all_gather given the sizes, on one host, in one C++ call.")
      .def(py::init([](std::shared_ptr<Group> group, size_t max_bytes, py::object fallback) {
             return GatherRows{std::move(group), max_bytes, std::move(fallback), py::module_::import("numpy").attr("empty"), {}};
           }),
           py::arg("group"), py::arg("max_bytes"), py::arg("fallback"))
      .def("__call__", &GatherRows::operator(), py::arg("x"), py::arg("sizes"),
           "Every member's x concatenated along axis 0 (sizes: every member's length, alike on every member).")
      .def_property_readonly("kept", [](const GatherRows& g) { return g.kept.size(); },
                             "How many layouts' outputs are kept (at most 16)."));
  fast_call<BroadcastCall, 2>(py::class_<BroadcastCall>(m, "BroadcastCall", "collectives.broadcast of the world, on one host, in one C++ call.")
      .def(py::init([](std::shared_ptr<Group> group, py::object fallback, py::object world) {
             return BroadcastCall{std::move(group), std::move(fallback), std::move(world)};
           }),
           py::arg("group"), py::arg("fallback"), py::arg("world"))
      .def("__call__", &BroadcastCall::operator(), py::arg("x"), py::arg("src"), "x from member src, in place, on every member."));
  fast_call<AllReduceCall, 2>(py::class_<AllReduceCall>(m, "AllReduceCall", "collectives.all_reduce of the world in place, on one host, in one C++ call.")
      .def(py::init([](std::shared_ptr<Group> group, py::object fallback, py::object world, py::dict ops) {
             return AllReduceCall{std::move(group), std::move(fallback), std::move(world), op_table(ops)};
           }),
           py::arg("group"), py::arg("fallback"), py::arg("world"), py::arg("ops"))
      .def("__call__", &AllReduceCall::operator(), py::arg("x"), py::arg("op"), "x reduced over the members with op, in place."));
  fast_call<ScatterRows, 3>(py::class_<ScatterRows>(m, "ScatterRows", "collectives.reduce_scatter of the world, on one host, in one C++ call.")
      .def(py::init([](std::shared_ptr<Group> group, size_t max_bytes, py::object fallback, py::object world, py::dict ops) {
             return ScatterRows{std::move(group), max_bytes, std::move(fallback), std::move(world),
                                py::module_::import("numpy").attr("empty"), op_table(ops), {}};
           }),
           py::arg("group"), py::arg("max_bytes"), py::arg("fallback"), py::arg("world"), py::arg("ops"))
      .def("__call__", &ScatterRows::operator(), py::arg("x"), py::arg("op"), py::arg("sizes"),
           "x reduced over the members with op; this member's piece along axis 0 (sizes: the pieces' lengths).")
      .def_property_readonly("kept", [](const ScatterRows& g) { return g.kept.size(); }, "Layouts whose outputs are kept."));
  fast_call<AllToAllRows, 3>(py::class_<AllToAllRows>(m, "AllToAllRows", "collectives.all_to_all given both sizes, on one host, in one C++ call.")
      .def(py::init([](std::shared_ptr<Group> group, size_t max_bytes, py::object fallback) {
             return AllToAllRows{std::move(group), max_bytes, std::move(fallback), py::module_::import("numpy").attr("empty"), {}};
           }),
           py::arg("group"), py::arg("max_bytes"), py::arg("fallback"))
      .def("__call__", &AllToAllRows::operator(), py::arg("x"), py::arg("send_sizes"), py::arg("recv_sizes"),
           "What every member sends here (recv_sizes rows from each), in member order.")
      .def_property_readonly("kept", [](const AllToAllRows& g) { return g.kept.size(); }, "Layouts whose outputs are kept."));
}

}  // namespace bindings
}  // namespace gt
