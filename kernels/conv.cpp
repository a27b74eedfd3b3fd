// Patches for convolution (see conv.h): one output row of one tap at a time, bounds checked
// against the padding, so no padded copy of x is made and dx comes out in x's layout.
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

template <typename T>
void to_cols(T* cols, const T* x, const ConvGeometry& g) {
  const size_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  for (size_t ch = 0; ch < g.c; ++ch)
    for (size_t i = 0; i < g.kh; ++i)
      for (size_t j = 0; j < g.kw; ++j) {
        size_t lo, hi;
        valid_columns(g, j, &lo, &hi);
        const long off = long(j * g.dw) - long(g.pw);
        T* dst = cols + ((ch * g.kh + i) * g.kw + j) * g.n * out_plane;
        for (size_t b = 0; b < g.n; ++b) {
          const T* src = x + (b * g.c + ch) * plane;
          for (size_t oy = 0; oy < g.oh; ++oy, dst += g.ow) {
            const long y = long(oy * g.sh + i * g.dh) - long(g.ph);
            if (y < 0 || y >= long(g.h) || lo >= hi) {
              std::memset(dst, 0, g.ow * sizeof(T));
              continue;
            }
            const T* row = src + size_t(y) * g.w;
            for (size_t ox = 0; ox < lo; ++ox) dst[ox] = T(0);
            if (g.sw == 1) {
              std::memcpy(dst + lo, row + long(lo) + off, (hi - lo) * sizeof(T));
            } else {
              for (size_t ox = lo; ox < hi; ++ox) dst[ox] = row[long(ox * g.sw) + off];
            }
            for (size_t ox = hi; ox < g.ow; ++ox) dst[ox] = T(0);
          }
        }
      }
}

template <typename T>
void from_cols(T* dx, const T* cols, const ConvGeometry& g) {
  const size_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  std::memset(dx, 0, g.n * g.c * plane * sizeof(T));
  for (size_t ch = 0; ch < g.c; ++ch)
    for (size_t i = 0; i < g.kh; ++i)
      for (size_t j = 0; j < g.kw; ++j) {
        size_t lo, hi;
        valid_columns(g, j, &lo, &hi);
        const long off = long(j * g.dw) - long(g.pw);
        const T* src = cols + ((ch * g.kh + i) * g.kw + j) * g.n * out_plane;
        for (size_t b = 0; b < g.n; ++b) {
          T* dst = dx + (b * g.c + ch) * plane;
          for (size_t oy = 0; oy < g.oh; ++oy, src += g.ow) {
            const long y = long(oy * g.sh + i * g.dh) - long(g.ph);
            if (y < 0 || y >= long(g.h)) continue;
            T* row = dst + size_t(y) * g.w;
            if (g.sw == 1) {
              T* r = row + off;
              for (size_t ox = lo; ox < hi; ++ox) r[ox] += src[ox];
            } else {
              for (size_t ox = lo; ox < hi; ++ox) row[long(ox * g.sw) + off] += src[ox];
            }
          }
        }
      }
}

}  // namespace

void im2col(void* cols, const void* x, const ConvGeometry& g, int32_t dtype) {
  if (dtype == 0)
    to_cols(static_cast<float*>(cols), static_cast<const float*>(x), g);
  else
    to_cols(static_cast<double*>(cols), static_cast<const double*>(x), g);
}

void col2im(void* dx, const void* cols, const ConvGeometry& g, int32_t dtype) {
  if (dtype == 0)
    from_cols(static_cast<float*>(dx), static_cast<const float*>(cols), g);
  else
    from_cols(static_cast<double*>(dx), static_cast<const double*>(cols), g);
}

}  // namespace gt
