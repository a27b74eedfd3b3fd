// Bindings of this rank's shared memory: Node (its arena and peers' mappings), arena blocks, numpy's allocator on it.
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "../kernels/group.h"
#include "../kernels/numpy_alloc.h"
#include "common.h"

namespace gt {
namespace bindings {
namespace {

// A block of this rank's shared-memory arena, exposed through the buffer protocol; the
// block goes back to the arena when the last numpy view of it is gone.
struct ShmBuffer {
  ShmBuffer(std::shared_ptr<Node> n, int64_t off, size_t size) : node(std::move(n)), offset(off), nbytes(size) {}
  ShmBuffer(const ShmBuffer&) = delete;  // a copy would free the block twice
  ShmBuffer& operator=(const ShmBuffer&) = delete;
  ~ShmBuffer() { node->arena().free(offset); }
  std::shared_ptr<Node> node;
  int64_t offset;
  size_t nbytes;
  char* data() const { return node->arena().base() + offset; }
};

}  // namespace

void bind_node(py::module_& m) {
  py::class_<ShmBuffer, std::shared_ptr<ShmBuffer>>(m, "ShmBuffer", py::buffer_protocol(),
      "A block of this rank's shared-memory arena (peers read it without a copy).")
      .def_buffer([](ShmBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {py::ssize_t(b.nbytes)}, {py::ssize_t(1)}, false);
      })
      .def_readonly("nbytes", &ShmBuffer::nbytes)
      .def_readonly("offset", &ShmBuffer::offset);

  py::class_<Node, std::shared_ptr<Node>>(m, "Node", "This rank's shared-memory arena and its peers' mappings.")
      .def(py::init<const std::string&, int, size_t>(), py::arg("prefix"), py::arg("rank"), py::arg("arena_bytes"))
      .def("map_peer", &Node::map_peer, py::arg("rank"), py::arg("path") = "",
           "Map the arena of another rank on this node (by its /proc/<pid>/fd/<fd> path).")
      .def_property_readonly("arena_fd", [](Node& n) { return n.arena().fd(); },
                             "The open file of this rank's arena (it has no name: peers open /proc/<pid>/fd/<fd>).")
      .def("unlink_arena", [](Node& n) { n.arena().unlink(); }, "Remove the arena's name once every peer mapped it.")
      .def("mark_finished", &Node::mark_finished, py::arg("how"),
           "Tell peers waiting for this rank that its script ended (how: 'finished the script', ...).")
      .def("give_up", &Node::give_up, py::arg("what"),
           "This rank raised outside a collective and goes on: peers waiting for it fail now, told `what`.")
      .def("alloc", [](std::shared_ptr<Node> n, size_t nbytes) {
        int64_t off = n->arena().alloc(nbytes);
        return std::make_shared<ShmBuffer>(n, off, nbytes);
      }, py::arg("nbytes"), "A block of the arena of at least nbytes.")
      .def("contains", [](Node& n, py::array a) {
        return n.arena().offset_of(a.data(), size_t(a.nbytes())) >= 0;
      }, py::arg("array"), "Whether the array's memory lies in this rank's arena.")
      .def("release_cached", [](Node& n) { n.arena().release_cached(); }, "Return free arena pages to the system.")
      .def_property_readonly("used_bytes", [](Node& n) { return n.arena().used_bytes(); })
      .def_property_readonly("cached_bytes", [](Node& n) { return n.arena().cached_bytes(); })
      .def_property_readonly("peak_bytes", [](Node& n) { return n.arena().peak_bytes(); })
      .def_property_readonly("reserve_bytes", [](Node& n) { return n.arena().reserve(); })
      .def("reset_peak", [](Node& n) { n.arena().reset_peak(); }, "Start the peak over from what is in use now.")
      .def_property_readonly("rank", &Node::rank);

  m.def("install_numpy_allocator", &gt::install_numpy_allocator, py::arg("node"), py::arg("min_bytes"),
        "Make the node's arena numpy's allocator (NEP 49) for arrays of at least min_bytes, in this context; "
        "False when numpy has no NEP 49 API.");
  m.def("uninstall_numpy_allocator", &gt::uninstall_numpy_allocator, "Put numpy's previous allocator back.");
  m.def("numpy_alloc_stats", [] {
    auto s = gt::numpy_alloc_stats();
    py::dict d;
    d["installed"] = s.installed;
    d["arena_allocs"] = s.arena_allocs;
    d["heap_fallbacks"] = s.heap_fallbacks;
    d["heap_fallback_bytes"] = s.heap_fallback_bytes;
    d["min_bytes"] = s.min_bytes;
    return d;
  }, "Counters of numpy's arena allocator.");
  m.def("size_class", &gt::size_class, py::arg("nbytes"), "The block size the allocator gives nbytes.");
}

}  // namespace bindings
}  // namespace gt
