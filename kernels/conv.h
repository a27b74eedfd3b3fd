// Patches for convolution (im2col and its adjoint col2im, channel-major over a whole batch) and max pooling.
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// Geometry of a 2-D convolution over x [n, c, h, w] with a kh x kw kernel.
struct ConvGeometry {
  size_t n, c, h, w, kh, kw, oh, ow;
  size_t sh, sw, ph, pw, dh, dw;
};

// cols [c, kh, kw, n, oh, ow] = x at each window tap (zero outside x: the padding).
void im2col(void* cols, const void* x, const ConvGeometry& g, int32_t dtype);

// dx [n, c, h, w] = the sum of cols [c, kh, kw, n, oh, ow] over the taps that read each element
// (taps in the padding are dropped): im2col's adjoint.
void col2im(void* dx, const void* cols, const ConvGeometry& g, int32_t dtype);

// out [n, c, oh, ow] = the max of each window of x (no padding), tap = its first largest
// element's index in the window (i * kw + j; a nan wins, the last of several): max pooling.
void max_pool(void* out, int64_t* tap, const void* x, const ConvGeometry& g, int32_t dtype);

// dx [n, c, h, w] = each window's gradient added at its tap (zeros elsewhere): max pooling's backward.
void max_pool_backward(void* dx, const void* grad, const int64_t* tap, const ConvGeometry& g, int32_t dtype);

}  // namespace gt
