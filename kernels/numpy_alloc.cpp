// numpy's data allocator (NEP 49) over this rank's shared-memory arena.
//
// numpy calls these with the GIL held; they make no Python calls (the one warning is a
// pending call) and take the arena's own lock. Arrays remember the handler that allocated
// them, so arrays from before the install are freed by numpy's default handler, and ours
// route every pointer by address: inside the arena -> the arena, else -> the previous handler.
#include "numpy_alloc.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "group.h"

namespace gt {

namespace {

// NEP 49's handler, version 1 (numpy/ndarraytypes.h: PyDataMem_Handler, stable since 1.22).
struct DataMemAllocator {
  void* ctx;
  void* (*malloc)(void* ctx, size_t size);
  void* (*calloc)(void* ctx, size_t nelem, size_t elsize);
  void* (*realloc)(void* ctx, void* ptr, size_t new_size);
  void (*free)(void* ctx, void* ptr, size_t size);
};
struct DataMemHandler {
  char name[127];
  uint8_t version;
  DataMemAllocator allocator;
};
constexpr const char* kCapsule = "mem_handler";
// Slots of numpy's C API table (numpy/__multiarray_api.h): the C feature version, then
// PyDataMem_SetHandler and PyDataMem_GetHandler (NPY_1_22_API_VERSION = 0xf and later).
constexpr int kFeatureVersion = 211, kSetHandler = 304, kGetHandler = 305;
constexpr unsigned kApi122 = 0xf;

struct State {
  std::shared_ptr<Node> node;  // never released: arrays may outlive every Python object
  Arena* arena = nullptr;
  size_t min_bytes = 0;
  DataMemAllocator prev{};     // the handler in place before ours
  PyObject* prev_capsule = nullptr;
  PyObject* (*set_handler)(PyObject*) = nullptr;
  std::atomic<bool> forked{false}, exhausted{false}, installed{false};
  std::atomic<size_t> arena_allocs{0}, heap_fallbacks{0}, heap_fallback_bytes{0};
};
State* g = nullptr;  // leaked on purpose (see State::node)

int warn_exhausted(void*) {
  if (PyErr_WarnEx(PyExc_ResourceWarning,
                   "globaltensor: the shared-memory arena is full (see GLOBALTENSOR_SHM_ARENA_GB and the size of "
                   "/dev/shm); large arrays now go to the heap, and collectives on them copy through staging",
                   1) < 0)
    PyErr_WriteUnraisable(nullptr);  // a warnings filter set to "error": report it, never raise here
  return 0;
}

bool wants_arena(size_t size) { return size >= g->min_bytes && !g->forked.load(std::memory_order_relaxed); }

// A block of the arena, or nullptr when the arena cannot hold it (the first time: one warning).
void* arena_block(size_t size, bool* zeroed) {
  try {
    int64_t off = g->arena->alloc(size_class(size), zeroed);
    g->arena_allocs++;
    return g->arena->base() + off;
  } catch (const std::exception&) {
    if (!g->exhausted.exchange(true)) Py_AddPendingCall(warn_exhausted, nullptr);
    g->heap_fallbacks++;
    g->heap_fallback_bytes += size;
    return nullptr;
  }
}

void* shm_malloc(void*, size_t size) {
  if (wants_arena(size))
    if (void* p = arena_block(size, nullptr)) return p;
  return g->prev.malloc(g->prev.ctx, size);
}

void* shm_calloc(void*, size_t nelem, size_t elsize) {
  size_t size;
  if (__builtin_mul_overflow(nelem, elsize, &size)) return nullptr;
  if (wants_arena(size)) {
    bool zeroed = false;
    if (void* p = arena_block(size, &zeroed)) {
      if (!zeroed) std::memset(p, 0, size);  // a reused block; fresh pages are zeros already
      return p;
    }
  }
  return g->prev.calloc(g->prev.ctx, nelem, elsize);
}

void shm_free(void*, void* ptr, size_t size) {
  if (ptr != nullptr && g->arena->contains(ptr)) {
    // after a fork the arena belongs to the parent: its blocks are not this process's to free
    if (!g->forked.load(std::memory_order_relaxed)) g->arena->free(static_cast<char*>(ptr) - g->arena->base());
    return;
  }
  g->prev.free(g->prev.ctx, ptr, size);
}

void* shm_realloc(void* ctx, void* ptr, size_t new_size) {
  if (ptr == nullptr || !g->arena->contains(ptr)) return g->prev.realloc(g->prev.ctx, ptr, new_size);
  size_t old = g->arena->size_of(static_cast<char*>(ptr) - g->arena->base());
  if (new_size <= old && !g->forked.load()) return ptr;  // still fits its block
  void* moved = shm_malloc(ctx, new_size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, ptr, std::min(old, new_size));
  shm_free(ctx, ptr, old);
  return moved;
}

DataMemHandler kHandler = {"globaltensor_shared_memory", 1,
                           {nullptr, shm_malloc, shm_calloc, shm_realloc, shm_free}};

void** numpy_api() {
  PyObject* mod = PyImport_ImportModule("numpy._core._multiarray_umath");
  if (mod == nullptr) {
    PyErr_Clear();
    mod = PyImport_ImportModule("numpy.core._multiarray_umath");
  }
  if (mod == nullptr) return nullptr;
  PyObject* capsule = PyObject_GetAttrString(mod, "_ARRAY_API");
  Py_DECREF(mod);
  if (capsule == nullptr) return nullptr;
  void** table = static_cast<void**>(PyCapsule_GetPointer(capsule, nullptr));
  Py_DECREF(capsule);  // the module keeps the table alive
  return table;
}

}  // namespace

size_t size_class(size_t nbytes) {
  constexpr size_t kPage = 4096, kMiB = size_t(1) << 20;
  if (nbytes <= kMiB) return (std::max<size_t>(nbytes, 1) + kPage - 1) / kPage * kPage;
  size_t step = (size_t(1) << (63 - __builtin_clzll(nbytes))) / 8;  // an eighth of the power of two below
  return (nbytes + step - 1) / step * step;
}

bool install_numpy_allocator(std::shared_ptr<Node> node, size_t min_bytes) {
  void** api = numpy_api();
  if (api == nullptr) throw std::runtime_error("numpy's C API table (_ARRAY_API) was not found");
  auto feature = reinterpret_cast<unsigned (*)()>(api[kFeatureVersion]);
  if (feature() < kApi122) return false;  // numpy older than 1.22: no NEP 49
  auto get_handler = reinterpret_cast<PyObject* (*)()>(api[kGetHandler]);
  auto set_handler = reinterpret_cast<PyObject* (*)(PyObject*)>(api[kSetHandler]);
  if (g == nullptr) {
    g = new State;
    g->node = node;
    g->arena = &node->arena();
    pthread_atfork(nullptr, nullptr, [] {
      g->forked.store(true);
      // The child gets its own copy of the arrays it inherits, as with memory of its own: the
      // arena is mapped again over the same addresses, copy-on-write (a write no longer
      // reaches the parent).
      Arena* a = g->arena;
      mmap(a->base(), a->reserve(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, a->fd(), 0);
    });
  } else if (g->node != node) {
    throw std::runtime_error("numpy's allocator is already this process's arena of another node");
  }
  PyObject* current = get_handler();
  if (current == nullptr) return false;
  auto* handler = static_cast<DataMemHandler*>(PyCapsule_GetPointer(current, kCapsule));
  if (handler == nullptr) {
    Py_DECREF(current);
    return false;
  }
  if (handler != &kHandler) {
    g->prev = handler->allocator;
    Py_XDECREF(g->prev_capsule);
    g->prev_capsule = current;  // kept: its allocator serves small arrays and fallbacks
  } else {
    Py_DECREF(current);
  }
  g->min_bytes = min_bytes;
  g->set_handler = set_handler;
  PyObject* ours = PyCapsule_New(&kHandler, kCapsule, nullptr);
  if (ours == nullptr) return false;
  PyObject* old = set_handler(ours);
  Py_DECREF(ours);
  if (old == nullptr) return false;
  Py_DECREF(old);
  g->installed = true;
  return true;
}

void uninstall_numpy_allocator() {
  if (g == nullptr || !g->installed) return;
  PyObject* old = g->set_handler(g->prev_capsule);
  Py_XDECREF(old);
  g->installed = false;
}

NumpyAllocStats numpy_alloc_stats() {
  NumpyAllocStats s;
  if (g == nullptr) return s;
  s.arena_allocs = g->arena_allocs;
  s.heap_fallbacks = g->heap_fallbacks;
  s.heap_fallback_bytes = g->heap_fallback_bytes;
  s.min_bytes = g->min_bytes;
  s.installed = g->installed;
  return s;
}

}  // namespace gt
