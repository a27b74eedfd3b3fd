// Special functions over arrays: erf (libm's, the same values as Python's math.erf).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {

// out[i] = erf(x[i]) for float32 (dtype 0, computed as erff) or float64 (dtype 1).
void erf(void* out, const void* x, size_t count, int32_t dtype);

}  // namespace gt
