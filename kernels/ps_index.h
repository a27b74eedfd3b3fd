// The parameter server's id -> row map (globaltensor/ps/_idindex.py's layout): linear probing over two slot arrays.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {

// Slots: slot_rows[s] = row (-1: empty), slot_ids[s] = its id; n_slots a power of two; an id's home slot is
// splitmix64(id ^ salt) >> shift (the Python fallback's hash). Neither call allocates; both run without the GIL.

// out[i] = row of ids[i], -1 where absent.
void ps_index_lookup(const int64_t* slot_ids, const int64_t* slot_rows, size_t n_slots, uint64_t salt, uint32_t shift,
                     const int64_t* ids, size_t n, int64_t* out);

// Puts (ids[i], rows[i]) into free slots (the ids absent and distinct; the caller keeps the slots at most half
// full); returns how many it placed: fewer than n only when the slots ran full.
size_t ps_index_place(int64_t* slot_ids, int64_t* slot_rows, size_t n_slots, uint64_t salt, uint32_t shift,
                    const int64_t* ids, const int64_t* rows, size_t n);

}  // namespace gt
