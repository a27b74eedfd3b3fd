// Row scatter-add (embedding's and index_select's backward): one pass over src, rows added in order.
#include "scatter.h"

namespace gt {
namespace {

template <typename T>
void add_rows(T* out, const int64_t* index, const T* src, size_t count, size_t width) {
  for (size_t i = 0; i < count; ++i) {
    T* row = out + size_t(index[i]) * width;
    const T* from = src + i * width;
    for (size_t j = 0; j < width; ++j) row[j] += from[j];
  }
}

}  // namespace

void index_add_rows(void* out, const int64_t* index, const void* src, size_t count, size_t width, int32_t dtype) {
  if (dtype == kF32) {
    add_rows(static_cast<float*>(out), index, static_cast<const float*>(src), count, width);
  } else if (dtype == kF64) {
    add_rows(static_cast<double*>(out), index, static_cast<const double*>(src), count, width);
  } else {
    throw std::invalid_argument("index_add_rows takes float32 or float64");
  }
}

}  // namespace gt
