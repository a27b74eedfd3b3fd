// Row normalisation kernels: LayerNorm forward and backward over the last `cols` elements.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {

// Per row r of x [rows, cols]: mean[r], rstd[r] = 1 / sqrt(var + eps) (sums in double),
// y = (x - mean) * rstd * w + b (w, b of cols elements, or null). dtype 0 float32, 1 float64.
void layer_norm(void* y, void* mean, void* rstd, const void* x, const void* w, const void* b, size_t rows,
                size_t cols, double eps, int32_t dtype);

// The gradient of layer_norm: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w;
// dw += sum over rows of g * xhat, db += sum over rows of g (either may be null; w null: ones).
void layer_norm_backward(void* dx, void* dw, void* db, const void* g, const void* x, const void* mean,
                         const void* rstd, const void* w, size_t rows, size_t cols, int32_t dtype);

}  // namespace gt
