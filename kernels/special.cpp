// Special functions and activation gradients over arrays (see special.h).
#include "special.h"

#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifdef GT_WITH_MVEC
extern "C" __m128 _ZGVbN4v_erff(__m128);  // glibc's libmvec (SSE2 ABI, dispatched inside)
extern "C" __m128 _ZGVbN4v_expf(__m128);
#endif

namespace gt {

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <typename T>
T gelu_one(T x) {
  return static_cast<T>(static_cast<double>(x) * 0.5 * (1.0 + std::erf(static_cast<double>(x) * kSqrtHalf)));
}

template <typename T>
T gelu_grad_one(T g, T x) {
  double v = static_cast<double>(x);
  double cdf = 0.5 * (1.0 + std::erf(v * kSqrtHalf));
  return static_cast<T>(static_cast<double>(g) * (cdf + v * kInvSqrt2Pi * std::exp(-0.5 * v * v)));
}

}  // namespace

void erf(void* out, const void* x, size_t count, int32_t dtype) {
  if (dtype == kF32) {
    auto* o = static_cast<float*>(out);
    auto* v = static_cast<const float*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = static_cast<float>(std::erf(static_cast<double>(v[i])));
  } else {
    auto* o = static_cast<double*>(out);
    auto* v = static_cast<const double*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = std::erf(v[i]);
  }
}

void gelu(void* out, const void* x, size_t count, int32_t dtype) {
  if (dtype == kF64) {
    auto* o = static_cast<double*>(out);
    auto* v = static_cast<const double*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = gelu_one(v[i]);
    return;
  }
  auto* o = static_cast<float*>(out);
  auto* v = static_cast<const float*>(x);
  size_t i = 0;
#ifdef GT_WITH_MVEC
  const __m128 half = _mm_set1_ps(0.5f), one = _mm_set1_ps(1.0f), s = _mm_set1_ps(static_cast<float>(kSqrtHalf));
  for (; i + 4 <= count; i += 4) {
    __m128 a = _mm_loadu_ps(v + i);
    __m128 cdf = _mm_mul_ps(half, _mm_add_ps(one, _ZGVbN4v_erff(_mm_mul_ps(a, s))));
    _mm_storeu_ps(o + i, _mm_mul_ps(a, cdf));
  }
#endif
  for (; i < count; ++i) o[i] = gelu_one(v[i]);
}

void gelu_backward(void* out, const void* g, const void* x, size_t count, int32_t dtype) {
  if (dtype == kF64) {
    auto* o = static_cast<double*>(out);
    auto* gv = static_cast<const double*>(g);
    auto* v = static_cast<const double*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = gelu_grad_one(gv[i], v[i]);
    return;
  }
  auto* o = static_cast<float*>(out);
  auto* gv = static_cast<const float*>(g);
  auto* v = static_cast<const float*>(x);
  size_t i = 0;
#ifdef GT_WITH_MVEC
  const __m128 half = _mm_set1_ps(0.5f), one = _mm_set1_ps(1.0f), s = _mm_set1_ps(static_cast<float>(kSqrtHalf));
  const __m128 c = _mm_set1_ps(static_cast<float>(kInvSqrt2Pi)), minus_half = _mm_set1_ps(-0.5f);
  for (; i + 4 <= count; i += 4) {
    __m128 a = _mm_loadu_ps(v + i);
    __m128 cdf = _mm_mul_ps(half, _mm_add_ps(one, _ZGVbN4v_erff(_mm_mul_ps(a, s))));
    __m128 pdf = _mm_mul_ps(c, _ZGVbN4v_expf(_mm_mul_ps(minus_half, _mm_mul_ps(a, a))));
    _mm_storeu_ps(o + i, _mm_mul_ps(_mm_loadu_ps(gv + i), _mm_add_ps(cdf, _mm_mul_ps(a, pdf))));
  }
#endif
  for (; i < count; ++i) o[i] = gelu_grad_one(gv[i], v[i]);
}

namespace {

// g times the mask as a number, 1 or 0 (numpy's g * (x > 0): even g * 1 multiplied, not a branch the
// CPU mispredicts on half the elements): the SSE2 lanes, four floats or two doubles a step, then the rest.
#if defined(__SSE2__)
size_t relu_lanes(float* o, const float* g, const float* x, size_t n) {
  size_t i = 0;
  for (const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f); i + 4 <= n; i += 4)
    _mm_storeu_ps(o + i, _mm_mul_ps(_mm_loadu_ps(g + i), _mm_and_ps(_mm_cmpgt_ps(_mm_loadu_ps(x + i), zero), one)));
  return i;
}
size_t relu_lanes(double* o, const double* g, const double* x, size_t n) {
  size_t i = 0;
  for (const __m128d zero = _mm_setzero_pd(), one = _mm_set1_pd(1.0); i + 2 <= n; i += 2)
    _mm_storeu_pd(o + i, _mm_mul_pd(_mm_loadu_pd(g + i), _mm_and_pd(_mm_cmpgt_pd(_mm_loadu_pd(x + i), zero), one)));
  return i;
}
#else
template <typename T>
size_t relu_lanes(T*, const T*, const T*, size_t) { return 0; }
#endif

template <typename T>
void relu_grad(T* o, const T* g, const T* x, size_t count) {
  for (size_t i = relu_lanes(o, g, x, count); i < count; ++i) o[i] = g[i] * (x[i] > T(0) ? T(1) : T(0));
}

}  // namespace

void relu_backward(void* out, const void* g, const void* x, size_t count, int32_t dtype) {
  if (dtype == kF64)
    relu_grad(static_cast<double*>(out), static_cast<const double*>(g), static_cast<const double*>(x), count);
  else
    relu_grad(static_cast<float*>(out), static_cast<const float*>(g), static_cast<const float*>(x), count);
}

}  // namespace gt
