// Element-wise reduction of several sources into several destinations, and large copies.
#pragma once
#include "types.h"

namespace gt {

// dsts[d][i] = srcs[0][i] (op) srcs[1][i] ... for i < count, for every destination d.
// Half types accumulate in float32 and round once. Summation order is srcs[0..n), so any
// rank computing the same block gets the same bits. `nontemporal` streams the stores.
void reduce_to(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
               int32_t dtype, int32_t redop, bool nontemporal);

// memcpy, with streaming (non-temporal) stores when `nontemporal` is set.
void copy_bytes(void* dst, const void* src, size_t nbytes, bool nontemporal);

}  // namespace gt
