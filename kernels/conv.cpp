// Patches for convolution and max pooling (see conv.h), one output row of one tap at a time.
// Bounds are checked against the padding, so no padded copy of x is made and dx comes out in x's
// layout. The geometry is passed by value: a copy the outputs cannot alias (int64_t taps could
// alias a reference's size_t fields), so its sizes stay in registers.
#include "conv.h"

#include <emmintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

namespace gt {

namespace {

// The output columns [lo, hi) of tap column j whose input column is inside x (the rest read padding).
void valid_columns(const ConvGeometry& g, size_t j, size_t* lo, size_t* hi) {
  const long off = long(j * g.dw) - long(g.pw);  // input column = ox * sw + off
  long first = off >= 0 ? 0 : (-off + long(g.sw) - 1) / long(g.sw);
  long last = (long(g.w) - off + long(g.sw) - 1) / long(g.sw);  // first ox past the right edge
  if (last > long(g.ow)) last = long(g.ow);
  if (first > last) first = last;
  *lo = size_t(first);
  *hi = size_t(last < 0 ? 0 : last);
}

// Calls visit(k, plane, y, lo, hi, off) for every output row of every tap: k the row's first
// element in cols [c, kh, kw, n, oh, ow], plane the first element of its image's channel in x
// [n, c, h, w], y the input row it reads (outside [0, h): padding), [lo, hi) the output columns
// that read inside x and off the input column of output column 0 (column ox reads ox * sw + off).
template <typename F>
void for_each_tap_row(const ConvGeometry& g, F visit) {
  const size_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (size_t ch = 0; ch < g.c; ++ch)
    for (size_t i = 0; i < g.kh; ++i)
      for (size_t j = 0; j < g.kw; ++j) {
        size_t lo, hi;
        valid_columns(g, j, &lo, &hi);
        const long off = long(j * g.dw) - long(g.pw);
        size_t k = ((ch * g.kh + i) * g.kw + j) * g.n * out_plane;
        for (size_t b = 0; b < g.n; ++b)
          for (size_t oy = 0; oy < g.oh; ++oy, k += g.ow)
            visit(k, (b * g.c + ch) * plane, long(oy * g.sh + i * g.dh) - long(g.ph), lo, hi, off);
      }
}

template <typename T>
void to_cols(T* cols, const T* x, const ConvGeometry g) {
  for_each_tap_row(g, [&](size_t k, size_t plane, long y, size_t lo, size_t hi, long off) {
    T* dst = cols + k;
    if (y < 0 || y >= long(g.h) || lo >= hi) {
      std::memset(dst, 0, g.ow * sizeof(T));
      return;
    }
    const T* row = x + plane + size_t(y) * g.w;
    for (size_t ox = 0; ox < lo; ++ox) dst[ox] = T(0);
    if (g.sw == 1) {
      std::memcpy(dst + lo, row + long(lo) + off, (hi - lo) * sizeof(T));
    } else {
      for (size_t ox = lo; ox < hi; ++ox) dst[ox] = row[long(ox * g.sw) + off];
    }
    for (size_t ox = hi; ox < g.ow; ++ox) dst[ox] = T(0);
  });
}

template <typename T>
void from_cols(T* dx, const T* cols, const ConvGeometry g) {
  std::memset(dx, 0, g.n * g.c * g.h * g.w * sizeof(T));
  for_each_tap_row(g, [&](size_t k, size_t plane, long y, size_t lo, size_t hi, long off) {
    if (y < 0 || y >= long(g.h)) return;
    const T* src = cols + k;
    T* row = dx + plane + size_t(y) * g.w;
    if (g.sw == 1) {
      T* r = row + off;
      for (size_t ox = lo; ox < hi; ++ox) r[ox] += src[ox];
    } else {
      for (size_t ox = lo; ox < hi; ++ox) row[long(ox * g.sw) + off] += src[ox];
    }
  });
}

// Outputs [0, returned) of a row of 2x2 windows at column stride 2 (rows r0, r1; dilation dw 1),
// four at a time: the taps in pool's order, the same comparisons lane by lane (SSE2).
size_t pool_2x2_sse(float* out, int64_t* tap, const float* r0, const float* r1, size_t dw, size_t ow) {
  if (dw != 1) return 0;
  size_t ox = 0;
  const __m128i zero = _mm_setzero_si128();
  for (; ox + 4 <= ow; ox += 4) {
    const float* a = r0 + 2 * ox;
    const float* b = r1 + 2 * ox;
    // within the rows: the last block reads column 2 * ow - 1 at most, and 2 * ow <= w
    const __m128 a0 = _mm_loadu_ps(a), a1 = _mm_loadu_ps(a + 4), b0 = _mm_loadu_ps(b), b1 = _mm_loadu_ps(b + 4);
    const __m128 v[4] = {_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)),   // tap 0: even columns of row 0
                         _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)),   // tap 1: its odd columns
                         _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)),   // tap 2: row 1's even
                         _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1))};  // tap 3: row 1's odd
    __m128 best = v[0];
    __m128i t = zero;
    for (int k = 1; k < 4; ++k) {
      const __m128 wins = _mm_or_ps(_mm_cmpgt_ps(v[k], best), _mm_cmpunord_ps(v[k], v[k]));
      best = _mm_or_ps(_mm_and_ps(wins, v[k]), _mm_andnot_ps(wins, best));
      const __m128i w = _mm_castps_si128(wins);
      t = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi32(k)), _mm_andnot_si128(w, t));
    }
    _mm_storeu_ps(out + ox, best);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tap + ox), _mm_unpacklo_epi32(t, zero));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tap + ox + 2), _mm_unpackhi_epi32(t, zero));
  }
  return ox;
}

// One output row at a time, each output's window tap by tap in order (i, then j) in registers:
// the first largest wins, and a nan wins (the last of several), as PyTorch's max pooling. KH, KW,
// SW: the window and the column stride when known at compile time (0: g's).
template <typename T, size_t KH, size_t KW, size_t SW>
void pool(T* out, int64_t* tap, const T* x, const ConvGeometry g) {
  const size_t kh = KH ? KH : g.kh, kw = KW ? KW : g.kw, sw = SW ? SW : g.sw;
  const size_t plane = g.h * g.w;
  for (size_t p = 0; p < g.n * g.c; ++p) {
    const T* src = x + p * plane;
    for (size_t oy = 0; oy < g.oh; ++oy, out += g.ow, tap += g.ow) {
      const T* corner = src + (oy * g.sh) * g.w;
      size_t ox = 0;
      if constexpr (std::is_same_v<T, float> && KH == 2 && KW == 2 && SW == 2)
        ox = pool_2x2_sse(out, tap, corner, corner + g.dh * g.w, g.dw, g.ow);
      for (; ox < g.ow; ++ox) {
        const T* at = corner + ox * sw;
        T best = at[0];
        int64_t t = 0;
        for (size_t i = 0; i < kh; ++i)
          for (size_t j = (i == 0 ? 1 : 0); j < kw; ++j) {
            const T v = at[i * g.dh * g.w + j * g.dw];
            const bool wins = (v > best) | (v != v);  // masks, not branches: random data mispredicts
            best = wins ? v : best;
            t = wins ? int64_t(i * kw + j) : t;
          }
        out[ox] = best;
        tap[ox] = t;
      }
    }
  }
}

template <typename T>
void unpool(T* dx, const T* grad, const int64_t* tap, const ConvGeometry g) {
  const size_t plane = g.h * g.w;
  std::memset(dx, 0, g.n * g.c * plane * sizeof(T));
  // Each tap's offset from its window's corner, read from a table: a division by kw per element
  // cost more than the rest of the loop. The adds run in the same order (overlapping windows: the same bits).
  std::vector<size_t> at(g.kh * g.kw);
  for (size_t i = 0; i < g.kh; ++i)
    for (size_t j = 0; j < g.kw; ++j) at[i * g.kw + j] = i * g.dh * g.w + j * g.dw;
  const size_t* off = at.data();
  for (size_t p = 0; p < g.n * g.c; ++p) {
    T* dst = dx + p * plane;
    for (size_t oy = 0; oy < g.oh; ++oy) {
      T* corner = dst + oy * g.sh * g.w;
      for (size_t ox = 0; ox < g.ow; ++ox) corner[ox * g.sw + off[tap[ox]]] += grad[ox];
      grad += g.ow;
      tap += g.ow;
    }
  }
}

}  // namespace

template <typename T>
void pool_any(T* out, int64_t* tap, const T* x, const ConvGeometry& g) {
  if (g.kh == 2 && g.kw == 2 && g.sw == 2)
    pool<T, 2, 2, 2>(out, tap, x, g);
  else if (g.kh == 3 && g.kw == 3 && g.sw == 2)
    pool<T, 3, 3, 2>(out, tap, x, g);
  else if (g.sw == 1)
    pool<T, 0, 0, 1>(out, tap, x, g);
  else
    pool<T, 0, 0, 0>(out, tap, x, g);
}

void max_pool(void* out, int64_t* tap, const void* x, const ConvGeometry& g, int32_t dtype) {
  if (dtype == kF32)
    pool_any(static_cast<float*>(out), tap, static_cast<const float*>(x), g);
  else
    pool_any(static_cast<double*>(out), tap, static_cast<const double*>(x), g);
}

void max_pool_backward(void* dx, const void* grad, const int64_t* tap, const ConvGeometry& g, int32_t dtype) {
  if (dtype == kF32)
    unpool(static_cast<float*>(dx), static_cast<const float*>(grad), tap, g);
  else
    unpool(static_cast<double*>(dx), static_cast<const double*>(grad), tap, g);
}

void im2col(void* cols, const void* x, const ConvGeometry& g, int32_t dtype) {
  if (dtype == kF32)
    to_cols(static_cast<float*>(cols), static_cast<const float*>(x), g);
  else
    to_cols(static_cast<double*>(cols), static_cast<const double*>(x), g);
}

void col2im(void* dx, const void* cols, const ConvGeometry& g, int32_t dtype) {
  if (dtype == kF32)
    from_cols(static_cast<float*>(dx), static_cast<const float*>(cols), g);
  else
    from_cols(static_cast<double*>(dx), static_cast<const double*>(cols), g);
}

}  // namespace gt
