// Row normalisation kernels (see norm.h): a few rows at a time, so their passes run in cache.
#include "norm.h"

#include <cmath>
#include <vector>

namespace gt {

namespace {

// Rows are taken R at a time with R independent double sums, so the sums' add latency overlaps;
// each row's sums still run in column order: the bits of one row at a time.
template <typename T, int R>
void forward_block(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, size_t cols, double eps) {
  double sum[R], sq[R], mu[R];
  for (int k = 0; k < R; ++k) sum[k] = sq[k] = 0.0;
  for (size_t c = 0; c < cols; ++c)
    for (int k = 0; k < R; ++k) sum[k] += x[k * cols + c];
  for (int k = 0; k < R; ++k) mu[k] = cols ? sum[k] / static_cast<double>(cols) : 0.0;
  for (size_t c = 0; c < cols; ++c)
    for (int k = 0; k < R; ++k) {
      const double d = x[k * cols + c] - mu[k];
      sq[k] += d * d;
    }
  for (int k = 0; k < R; ++k) {
    const double inv = 1.0 / std::sqrt((cols ? sq[k] / static_cast<double>(cols) : 0.0) + eps);
    mean[k] = static_cast<T>(mu[k]);
    rstd[k] = static_cast<T>(inv);
    const T m = static_cast<T>(mu[k]), s = static_cast<T>(inv);
    const T* xr = x + k * cols;
    T* yr = y + k * cols;
    for (size_t c = 0; c < cols; ++c) {
      T v = (xr[c] - m) * s;
      if (w) v = v * w[c];
      if (b) v = v + b[c];
      yr[c] = v;
    }
  }
}

template <typename T>
void forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, size_t rows, size_t cols, double eps) {
  constexpr int R = 8;
  size_t r = 0;
  for (; r + R <= rows; r += R) forward_block<T, R>(y + r * cols, mean + r, rstd + r, x + r * cols, w, b, cols, eps);
  for (; r < rows; ++r) forward_block<T, 1>(y + r * cols, mean + r, rstd + r, x + r * cols, w, b, cols, eps);
}

template <typename T>
void backward(T* dx, T* dw, T* db, const T* g, const T* x, const T* mean, const T* rstd, const T* w, size_t rows,
              size_t cols) {
  std::vector<double> acc_w(dw ? cols : 0, 0.0), acc_b(db ? cols : 0, 0.0);
  std::vector<T> gw(cols);
  for (size_t r = 0; r < rows; ++r) {
    const T* gr = g + r * cols;
    const T* xr = x + r * cols;
    const T m = mean[r], s = rstd[r];
    double sum_gw = 0.0, sum_gwx = 0.0;
    for (size_t c = 0; c < cols; ++c) {
      const T xhat = (xr[c] - m) * s;
      const T v = w ? gr[c] * w[c] : gr[c];
      gw[c] = v;
      sum_gw += v;
      sum_gwx += static_cast<double>(v) * xhat;
      if (dw) acc_w[c] += static_cast<double>(gr[c]) * xhat;
      if (db) acc_b[c] += gr[c];
    }
    if (dx) {
      const T a = static_cast<T>(cols ? sum_gw / static_cast<double>(cols) : 0.0);
      const T bb = static_cast<T>(cols ? sum_gwx / static_cast<double>(cols) : 0.0);
      T* dr = dx + r * cols;
      for (size_t c = 0; c < cols; ++c) dr[c] = s * (gw[c] - a - (xr[c] - m) * s * bb);
    }
  }
  for (size_t c = 0; c < acc_w.size(); ++c) dw[c] = static_cast<T>(acc_w[c]);
  for (size_t c = 0; c < acc_b.size(); ++c) db[c] = static_cast<T>(acc_b[c]);
}

// BatchNorm's per-channel sums: each plane (image i, channel k) summed in its own order, kPlanes
// planes side by side (independent chains: the adds' latency overlaps, each plane's bits unchanged),
// then added into the channel's total image by image, as one plane at a time did.
constexpr size_t kPlanes = 4;

template <typename T>
void sums(double* s1, double* s2, const T* x, size_t n, size_t c, size_t hw) {
  for (size_t k = 0; k < c; ++k) s1[k] = s2[k] = 0.0;
  for (size_t i = 0; i < n; ++i) {
    size_t k = 0;
    for (; k + kPlanes <= c; k += kPlanes) {
      const T* p = x + (i * c + k) * hw;
      double a[kPlanes] = {}, b[kPlanes] = {};
      for (size_t j = 0; j < hw; ++j)
        for (size_t q = 0; q < kPlanes; ++q) {
          const double v = p[q * hw + j];
          a[q] += v;
          b[q] += v * v;
        }
      for (size_t q = 0; q < kPlanes; ++q) {
        s1[k + q] += a[q];
        s2[k + q] += b[q];
      }
    }
    for (; k < c; ++k) {
      const T* p = x + (i * c + k) * hw;
      double a = 0.0, b = 0.0;
      for (size_t j = 0; j < hw; ++j) {
        const double v = p[j];
        a += v;
        b += v * v;
      }
      s1[k] += a;
      s2[k] += b;
    }
  }
}

template <typename T>
void affine(T* y, const T* x, const T* a, const T* b, size_t n, size_t c, size_t hw) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < c; ++k) {
      const size_t at = (i * c + k) * hw;
      const T s = a[k], t = b[k];
      for (size_t j = 0; j < hw; ++j) y[at + j] = x[at + j] * s + t;
    }
}

template <typename T>
void affine_backward(T* dx, double* sum_g, double* sum_gx, const T* g, const T* x, const T* a, size_t n, size_t c,
                     size_t hw) {
  for (size_t k = 0; k < c; ++k) sum_g[k] = sum_gx[k] = 0.0;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < c; ++k) {
      const size_t at = (i * c + k) * hw;
      const T s = a[k];
      double sg = 0.0, sgx = 0.0;
      for (size_t j = 0; j < hw; ++j) {
        const T v = g[at + j];
        dx[at + j] = v * s;
        sg += v;
        sgx += static_cast<double>(v) * x[at + j];
      }
      sum_g[k] += sg;
      sum_gx[k] += sgx;
    }
}

}  // namespace

void channel_sums(double* s1, double* s2, const void* x, size_t n, size_t c, size_t hw, int32_t dtype) {
  if (dtype == kF32)
    sums(s1, s2, static_cast<const float*>(x), n, c, hw);
  else
    sums(s1, s2, static_cast<const double*>(x), n, c, hw);
}

void channel_affine(void* y, const void* x, const void* a, const void* b, size_t n, size_t c, size_t hw,
                    int32_t dtype) {
  if (dtype == kF32)
    affine(static_cast<float*>(y), static_cast<const float*>(x), static_cast<const float*>(a),
           static_cast<const float*>(b), n, c, hw);
  else
    affine(static_cast<double*>(y), static_cast<const double*>(x), static_cast<const double*>(a),
           static_cast<const double*>(b), n, c, hw);
}

void channel_affine_backward(void* dx, double* sum_g, double* sum_gx, const void* g, const void* x, const void* a,
                             size_t n, size_t c, size_t hw, int32_t dtype) {
  if (dtype == kF32)
    affine_backward(static_cast<float*>(dx), sum_g, sum_gx, static_cast<const float*>(g),
                    static_cast<const float*>(x), static_cast<const float*>(a), n, c, hw);
  else
    affine_backward(static_cast<double*>(dx), sum_g, sum_gx, static_cast<const double*>(g),
                    static_cast<const double*>(x), static_cast<const double*>(a), n, c, hw);
}

void layer_norm(void* y, void* mean, void* rstd, const void* x, const void* w, const void* b, size_t rows,
                size_t cols, double eps, int32_t dtype) {
  if (dtype == kF32)
    forward(static_cast<float*>(y), static_cast<float*>(mean), static_cast<float*>(rstd), static_cast<const float*>(x),
            static_cast<const float*>(w), static_cast<const float*>(b), rows, cols, eps);
  else
    forward(static_cast<double*>(y), static_cast<double*>(mean), static_cast<double*>(rstd),
            static_cast<const double*>(x), static_cast<const double*>(w), static_cast<const double*>(b), rows, cols, eps);
}

void layer_norm_backward(void* dx, void* dw, void* db, const void* g, const void* x, const void* mean,
                         const void* rstd, const void* w, size_t rows, size_t cols, int32_t dtype) {
  if (dtype == kF32)
    backward(static_cast<float*>(dx), static_cast<float*>(dw), static_cast<float*>(db), static_cast<const float*>(g),
             static_cast<const float*>(x), static_cast<const float*>(mean), static_cast<const float*>(rstd),
             static_cast<const float*>(w), rows, cols);
  else
    backward(static_cast<double*>(dx), static_cast<double*>(dw), static_cast<double*>(db),
             static_cast<const double*>(g), static_cast<const double*>(x), static_cast<const double*>(mean),
             static_cast<const double*>(rstd), static_cast<const double*>(w), rows, cols);
}

}  // namespace gt
