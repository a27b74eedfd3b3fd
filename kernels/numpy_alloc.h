// numpy's data allocator (NEP 49) over this rank's shared-memory arena.
// Large arrays live in shared memory, so collectives read them in place and freed blocks are
// reused without fresh page faults.
#pragma once
#include <Python.h>

#include <cstddef>
#include <memory>

namespace gt {

class Node;

struct NumpyAllocStats {
  size_t arena_allocs = 0;     // arrays placed in the arena so far
  size_t heap_fallbacks = 0;   // large arrays that went to the heap (arena exhausted)
  size_t heap_fallback_bytes = 0;
  size_t min_bytes = 0;        // smaller arrays stay on the heap
  bool installed = false;
};

// Makes the arena of `node` numpy's allocator in the calling thread's context for arrays of at
// least `min_bytes` (the others, and every array when the arena is exhausted or after a fork,
// go to the handler that was in place). Returns false when this numpy has no NEP 49 API.
// The node is kept alive for the rest of the process: arrays may outlive every Python object.
bool install_numpy_allocator(std::shared_ptr<Node> node, size_t min_bytes);
// Puts the previous handler back for the calling context (arena arrays still free correctly).
void uninstall_numpy_allocator();
NumpyAllocStats numpy_alloc_stats();
// Size classes: pages up to 1 MiB, then eight steps per power of two (at most 12.5% more).
size_t size_class(size_t nbytes);

}  // namespace gt
