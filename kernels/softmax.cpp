// Attention's row passes: the causal -inf and the max's subtraction in one pass; the softmax gradient's two ops in one.
#include "softmax.h"

#include <cmath>
#include <limits>

#include "types.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gt {
namespace {

// The row's max by numpy's rules for the bits that matter after the subtraction: the row's first
// NaN if it holds one, else the largest value (a +0 / -0 tie leaves x - max the same up to zero's
// sign, and exp of either zero is 1).
template <class T>
T row_max(const T* s, size_t n) {
  T m = s[0];
  bool nan = false;
  size_t j = 0;
#if defined(__SSE2__)
  if constexpr (sizeof(T) == 4) {
    if (n >= 4) {
      __m128 vm = _mm_loadu_ps(s), vnan = _mm_setzero_ps();
      for (; j + 4 <= n; j += 4) {
        __m128 v = _mm_loadu_ps(s + j);
        vnan = _mm_or_ps(vnan, _mm_cmpunord_ps(v, v));
        vm = _mm_max_ps(v, vm);  // v > vm ? v : vm
      }
      alignas(16) float lanes[4];
      _mm_store_ps(lanes, vm);
      nan = _mm_movemask_ps(vnan) != 0;
      for (float v : lanes) m = v > m ? v : m;
    }
  }
#endif
  for (; j < n; ++j) {
    T v = s[j];
    nan |= v != v;
    m = v > m ? v : m;
  }
  if (nan)
    for (j = 0; j < n; ++j)
      if (s[j] != s[j]) return s[j];  // the row's own NaN (its sign and payload), as numpy's max returns it
  return m;
}

template <class T>
void shift(T* scores, size_t batch, size_t lq, size_t lk, bool causal, int64_t first) {
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (size_t b = 0; b < batch; ++b) {
    for (size_t i = 0; i < lq; ++i) {
      T* row = scores + (b * lq + i) * lk;
      if (causal) {
        int64_t from = int64_t(i) + first + 1;
        for (int64_t j = from < 0 ? 0 : from; j < int64_t(lk); ++j) row[j] = minus_inf;
      }
      if (lk == 0) continue;
      T m = row_max(row, lk);
      for (size_t j = 0; j < lk; ++j) row[j] = row[j] - m;
    }
  }
}

template <class T>
void grad(T* ds, const T* rowsum, const T* w, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    T* d = ds + r * cols;
    const T* wr = w + r * cols;
    const T sum = rowsum[r];
    for (size_t j = 0; j < cols; ++j) d[j] = (d[j] - sum) * wr[j];
  }
}

}  // namespace

void softmax_shift(void* scores, size_t batch, size_t lq, size_t lk, bool causal, int64_t first, int32_t dtype) {
  if (dtype == kF32)
    shift(static_cast<float*>(scores), batch, lq, lk, causal, first);
  else if (dtype == kF64)
    shift(static_cast<double*>(scores), batch, lq, lk, causal, first);
  else
    throw std::invalid_argument("softmax_shift: float32 or float64 only");
}

void softmax_grad(void* ds, const void* rowsum, const void* w, size_t rows, size_t cols, int32_t dtype) {
  if (dtype == kF32)
    grad(static_cast<float*>(ds), static_cast<const float*>(rowsum), static_cast<const float*>(w), rows, cols);
  else if (dtype == kF64)
    grad(static_cast<double*>(ds), static_cast<const double*>(rowsum), static_cast<const double*>(w), rows, cols);
  else
    throw std::invalid_argument("softmax_grad: float32 or float64 only");
}

}  // namespace gt
