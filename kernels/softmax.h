// Attention's passes over rows of scores (float32/float64, in place): the max's shift and the softmax's gradient.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {

// scores [batch, lq, lk]: when causal, -inf at every key j > i + first of query row i; then each
// row minus its max (NaN where the row holds a NaN: numpy's max), numpy's rounding exactly.
void softmax_shift(void* scores, size_t batch, size_t lq, size_t lk, bool causal, int64_t first, int32_t dtype);

// ds [rows, cols] = (ds - rowsum[r]) * w, one pass (two roundings, as numpy's two in-place ops).
void softmax_grad(void* ds, const void* rowsum, const void* w, size_t rows, size_t cols, int32_t dtype);

}  // namespace gt
