// The parameter server's id -> row map: one probe loop per id (the numpy fallback needs a pass per probe round).
#include "ps_index.h"

namespace gt {
namespace {

inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline size_t home(int64_t id, uint64_t salt, uint32_t shift) {
  return size_t(splitmix64(uint64_t(id) ^ salt) >> shift);
}

}  // namespace

void ps_index_lookup(const int64_t* slot_ids, const int64_t* slot_rows, size_t n_slots, uint64_t salt, uint32_t shift,
                     const int64_t* ids, size_t n, int64_t* out) {
  const size_t mask = n_slots - 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    size_t s = home(id, salt, shift);
    int64_t row = -1;
    for (size_t probes = 0; probes < n_slots; ++probes, s = (s + 1) & mask) {
      const int64_t r = slot_rows[s];
      if (r < 0) break;
      if (slot_ids[s] == id) {
        row = r;
        break;
      }
    }
    out[i] = row;
  }
}

size_t ps_index_place(int64_t* slot_ids, int64_t* slot_rows, size_t n_slots, uint64_t salt, uint32_t shift,
                      const int64_t* ids, const int64_t* rows, size_t n) {
  const size_t mask = n_slots - 1;
  for (size_t i = 0; i < n; ++i) {
    size_t s = home(ids[i], salt, shift);
    for (size_t probes = 0; slot_rows[s] >= 0; ++probes, s = (s + 1) & mask)
      if (probes == n_slots) return i;  // no free slot: never loop forever
    slot_rows[s] = rows[i];
    slot_ids[s] = ids[i];
  }
  return n;
}

}  // namespace gt
