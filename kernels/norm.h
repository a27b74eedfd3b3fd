// Normalisation kernels: LayerNorm over the last `cols` elements; BatchNorm's per-channel passes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// Per row r of x [rows, cols]: mean[r], rstd[r] = 1 / sqrt(var + eps) (sums in double),
// y = (x - mean) * rstd * w + b (w, b of cols elements, or null). dtype kF32 or kF64.
void layer_norm(void* y, void* mean, void* rstd, const void* x, const void* w, const void* b, size_t rows,
                size_t cols, double eps, int32_t dtype);

// The gradient of layer_norm: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w;
// dw += sum over rows of g * xhat, db += sum over rows of g (either may be null; w null: ones).
void layer_norm_backward(void* dx, void* dw, void* db, const void* g, const void* x, const void* mean,
                         const void* rstd, const void* w, size_t rows, size_t cols, int32_t dtype);

// Per channel c of x [n, c, hw]: s1[c] = sum of x, s2[c] = sum of x * x (double sums).
void channel_sums(double* s1, double* s2, const void* x, size_t n, size_t c, size_t hw, int32_t dtype);

// y = x * a[c] + b[c] over x [n, c, hw] (a, b in x's dtype).
void channel_affine(void* y, const void* x, const void* a, const void* b, size_t n, size_t c, size_t hw,
                    int32_t dtype);

// dx = g * a[c]; sum_g[c] = sum of g, sum_gx[c] = sum of g * x (double sums): channel_affine's
// gradient in one pass.
void channel_affine_backward(void* dx, double* sum_g, double* sum_gx, const void* g, const void* x, const void* a,
                             size_t n, size_t c, size_t hw, int32_t dtype);

}  // namespace gt
