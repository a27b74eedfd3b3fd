// Patches for convolution: im2col and its adjoint col2im, channel-major over a whole batch.
#pragma once
#include <cstddef>
#include <cstdint>

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

}  // namespace gt
