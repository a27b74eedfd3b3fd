// Row normalisation kernels (see norm.h): one row at a time, so its passes run in cache.
#include "norm.h"

#include <cmath>
#include <vector>

namespace gt {

namespace {

template <typename T>
void forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, size_t rows, size_t cols, double eps) {
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    double sum = 0.0;
    for (size_t c = 0; c < cols; ++c) sum += xr[c];
    const double mu = cols ? sum / static_cast<double>(cols) : 0.0;
    double sq = 0.0;
    for (size_t c = 0; c < cols; ++c) {
      const double d = xr[c] - mu;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt((cols ? sq / static_cast<double>(cols) : 0.0) + eps);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(inv);
    const T m = static_cast<T>(mu), s = static_cast<T>(inv);
    for (size_t c = 0; c < cols; ++c) {
      T v = (xr[c] - m) * s;
      if (w) v = v * w[c];
      if (b) v = v + b[c];
      yr[c] = v;
    }
  }
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

}  // namespace

void layer_norm(void* y, void* mean, void* rstd, const void* x, const void* w, const void* b, size_t rows,
                size_t cols, double eps, int32_t dtype) {
  if (dtype == 0)
    forward(static_cast<float*>(y), static_cast<float*>(mean), static_cast<float*>(rstd), static_cast<const float*>(x),
            static_cast<const float*>(w), static_cast<const float*>(b), rows, cols, eps);
  else
    forward(static_cast<double*>(y), static_cast<double*>(mean), static_cast<double*>(rstd),
            static_cast<const double*>(x), static_cast<const double*>(w), static_cast<const double*>(b), rows, cols, eps);
}

void layer_norm_backward(void* dx, void* dw, void* db, const void* g, const void* x, const void* mean,
                         const void* rstd, const void* w, size_t rows, size_t cols, int32_t dtype) {
  if (dtype == 0)
    backward(static_cast<float*>(dx), static_cast<float*>(dw), static_cast<float*>(db), static_cast<const float*>(g),
             static_cast<const float*>(x), static_cast<const float*>(mean), static_cast<const float*>(rstd),
             static_cast<const float*>(w), rows, cols);
  else
    backward(static_cast<double*>(dx), static_cast<double*>(dw), static_cast<double*>(db),
             static_cast<const double*>(g), static_cast<const double*>(x), static_cast<const double*>(mean),
             static_cast<const double*>(rstd), static_cast<const double*>(w), rows, cols);
}

}  // namespace gt
