// Adam in one pass: numpy's _adam runs about a dozen passes with full-size temporaries.
#include "adam.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gt {

namespace {

// kDecay: 0 none, 1 L2 (g + wd * w), 2 decoupled (w *= 1 - lr * wd); kMax: amsgrad. By blocks of
// kBlock elements in three loops, the first and last branch-free so the compiler vectorizes them,
// the square roots between (std::sqrt may set errno, which keeps a loop holding it scalar). Each
// element goes through the same IEEE operations in the same order either way: the same bits.
constexpr size_t kBlock = 1024;

template <typename T, int kDecay, bool kMax>
void run(T* __restrict w, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax, size_t n,
         const AdamScalars& s) {
  const T b1 = T(s.b1), b2 = T(s.b2), one_b1 = T(1 - s.b1), one_b2 = T(1 - s.b2), eps = T(s.eps);
  const T wd = T(s.weight_decay), decay = T(s.decay_factor), step_size = T(s.step_size), bias2 = T(s.bias2);
  alignas(64) T root[kBlock];
  for (size_t lo = 0; lo < n; lo += kBlock) {
    const size_t len = std::min(kBlock, n - lo);
    T* __restrict wb = w + lo;
    const T* __restrict gb = g + lo;
    T* __restrict mb = m + lo;
    T* __restrict vb = v + lo;
    for (size_t i = 0; i < len; ++i) {
      T wi = wb[i], gi = gb[i];
      if (kDecay == 2) wi = wi * decay;       // w *= 1 - lr * wd
      if (kDecay == 1) gi = gi + wd * wi;     // g = g + wd * w
      T mi = mb[i] * b1;                      // m *= b1
      mi = mi + one_b1 * gi;                  // m += (1 - b1) * g
      T vi = vb[i] * b2;                      // v *= b2
      vi = vi + (one_b2 * gi) * gi;           // v += (1 - b2) * g * g
      if (kMax) {                             // np.maximum(vmax, v, out=vmax); v = vmax (NaN propagates)
        T a = vmax[lo + i];
        T hi = a != a ? a : vi != vi ? vi : (a < vi ? vi : a);
        vmax[lo + i] = hi;
        vb[i] = vi;
        vi = hi;
      } else {
        vb[i] = vi;
      }
      wb[i] = wi;
      mb[i] = mi;
      root[i] = vi / bias2;                   // v / (1 - b2 ** step)
    }
    for (size_t i = 0; i < len; ++i) root[i] = std::sqrt(root[i]);
    for (size_t i = 0; i < len; ++i)          // w -= step_size * m / (sqrt(...) + eps)
      wb[i] = wb[i] - (step_size * mb[i]) / (root[i] + eps);
  }
}

template <typename T>
void dispatch(T* w, const T* g, T* m, T* v, T* vmax, size_t n, const AdamScalars& s) {
  int decay = s.weight_decay == 0 ? 0 : s.decoupled ? 2 : 1;
  if (vmax) {
    if (decay == 0) run<T, 0, true>(w, g, m, v, vmax, n, s);
    else if (decay == 1) run<T, 1, true>(w, g, m, v, vmax, n, s);
    else run<T, 2, true>(w, g, m, v, vmax, n, s);
  } else {
    if (decay == 0) run<T, 0, false>(w, g, m, v, vmax, n, s);
    else if (decay == 1) run<T, 1, false>(w, g, m, v, vmax, n, s);
    else run<T, 2, false>(w, g, m, v, vmax, n, s);
  }
}

}  // namespace

void adam_update(void* w, const void* g, void* m, void* v, void* vmax, size_t count, int32_t dtype,
                 const AdamScalars& s) {
  if (dtype == kF32)
    dispatch(static_cast<float*>(w), static_cast<const float*>(g), static_cast<float*>(m), static_cast<float*>(v),
        static_cast<float*>(vmax), count, s);
  else if (dtype == kF64)
    dispatch(static_cast<double*>(w), static_cast<const double*>(g), static_cast<double*>(m), static_cast<double*>(v),
        static_cast<double*>(vmax), count, s);
  else
    throw std::invalid_argument("adam_update takes float32 or float64");
}

}  // namespace gt
