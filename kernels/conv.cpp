// Patches for convolution and max pooling (see conv.h), one output row of one tap at a time.
// Bounds are checked against the padding, so no padded copy of x is made and dx comes out in x's
// layout. The geometry is passed by value: a copy the outputs cannot alias (int64_t taps could
// alias a reference's size_t fields), so its sizes stay in registers.
#include "conv.h"

#include <cstring>

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

template <typename T, size_t SW>  // SW: the column stride when known at compile time (0: g.sw)
void pool(T* out, int64_t* tap, const T* x, const ConvGeometry g) {
  const size_t sw = SW ? SW : g.sw;
  // One output row at a time, tap by tap over the whole row: the first largest wins, and a nan
  // wins (the last of several), as PyTorch's max pooling.
  const size_t plane = g.h * g.w;
  for (size_t p = 0; p < g.n * g.c; ++p) {
    const T* src = x + p * plane;
    for (size_t oy = 0; oy < g.oh; ++oy, out += g.ow, tap += g.ow) {
      const T* first = src + (oy * g.sh) * g.w;
      for (size_t ox = 0; ox < g.ow; ++ox) {
        out[ox] = first[ox * sw];
        tap[ox] = 0;
      }
      for (size_t i = 0; i < g.kh; ++i) {
        const T* row = src + (oy * g.sh + i * g.dh) * g.w;
        for (size_t j = (i == 0 ? 1 : 0); j < g.kw; ++j) {
          const T* at = row + j * g.dw;
          const int64_t t = int64_t(i * g.kw + j);
          for (size_t ox = 0; ox < g.ow; ++ox) {  // masks, not branches: random data mispredicts
            const T v = at[ox * sw], b = out[ox];
            const int64_t wins = int64_t((v > b) | (v != v)), mask = -wins;  // the last nan, as PyTorch
            out[ox] = wins ? v : b;
            tap[ox] = (t & mask) | (tap[ox] & ~mask);
          }
        }
      }
    }
  }
}

template <typename T>
void unpool(T* dx, const T* grad, const int64_t* tap, const ConvGeometry g) {
  const size_t plane = g.h * g.w;
  std::memset(dx, 0, g.n * g.c * plane * sizeof(T));
  for (size_t p = 0; p < g.n * g.c; ++p) {
    T* dst = dx + p * plane;
    for (size_t oy = 0; oy < g.oh; ++oy)
      for (size_t ox = 0; ox < g.ow; ++ox, ++grad, ++tap) {
        const size_t i = size_t(*tap) / g.kw, j = size_t(*tap) % g.kw;
        dst[(oy * g.sh + i * g.dh) * g.w + ox * g.sw + j * g.dw] += *grad;
      }
  }
}

}  // namespace

template <typename T>
void pool_any(T* out, int64_t* tap, const T* x, const ConvGeometry& g) {
  if (g.sw == 2)
    pool<T, 2>(out, tap, x, g);
  else if (g.sw == 1)
    pool<T, 1>(out, tap, x, g);
  else
    pool<T, 0>(out, tap, x, g);
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
