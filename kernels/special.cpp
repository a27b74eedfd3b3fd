// Special functions over arrays (see special.h).
#include "special.h"

#include <cmath>

namespace gt {

void erf(void* out, const void* x, size_t count, int32_t dtype) {
  if (dtype == 0) {
    auto* o = static_cast<float*>(out);
    auto* v = static_cast<const float*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = static_cast<float>(std::erf(static_cast<double>(v[i])));
  } else {
    auto* o = static_cast<double*>(out);
    auto* v = static_cast<const double*>(x);
    for (size_t i = 0; i < count; ++i) o[i] = std::erf(v[i]);
  }
}

}  // namespace gt
