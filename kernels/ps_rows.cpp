// The parameter server's row kernels: one pass per batch, no per-row Python, numpy's float32 rounding.
#include "ps_rows.h"

namespace gt {
namespace {

inline uint64_t mix(uint64_t z) {  // splitmix64 (globaltensor/ps/_mix.py)
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kColumnStep = 0xD1B54A32D192ED03ULL;  // init.py's _COLUMN_STEP

}  // namespace

void ps_uniform_rows(const int64_t* ids, size_t n, uint64_t table_key, size_t dim, float scale, float lo, float* out) {
  const float unit = 1.0f / float(1 << 24);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = mix(uint64_t(ids[i]) ^ table_key);
    float* row = out + i * dim;
    for (size_t j = 0; j < dim; j += 2) {
      const uint64_t bits = mix(key + uint64_t(j / 2) * kColumnStep);
      float u = float(uint32_t(bits) >> 8) * unit;
      row[j] = u * scale + lo;  // -ffp-contract=off: two roundings, as numpy's *= then +=
      if (j + 1 < dim) {
        u = float(uint32_t(bits >> 32) >> 8) * unit;
        row[j + 1] = u * scale + lo;
      }
    }
  }
}

void ps_sgd_rows(float* store, size_t stride, const int64_t* rows, size_t n, const float* grads, size_t dim,
                 float lr) {
  for (size_t i = 0; i < n; ++i) {
    float* value = store + size_t(rows[i]) * stride;
    const float* grad = grads + i * dim;
    for (size_t c = 0; c < dim; ++c) {
      const float step = lr * grad[c];
      value[c] -= step;
    }
  }
}

void ps_add_rows(float* out, const int64_t* index, size_t n, const float* rows, size_t dim) {
  for (size_t i = 0; i < n; ++i) {
    float* sum = out + size_t(index[i]) * dim;
    const float* row = rows + i * dim;
    for (size_t c = 0; c < dim; ++c) sum[c] += row[c];
  }
}

}  // namespace gt
