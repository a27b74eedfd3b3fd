// Special functions over arrays: erf (libm's, the same values as Python's math.erf), GELU, ReLU's gradient.
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// out[i] = erf(x[i]) for float32 (kF32, computed through double) or float64 (kF64).
void erf(void* out, const void* x, size_t count, int32_t dtype);

// out[i] = x * Phi(x), Phi the normal CDF 0.5 * (1 + erf(x / sqrt 2)): float32 four lanes at a
// time through glibc's vector erff (within an ulp of erf), float64 through libm's erf.
void gelu(void* out, const void* x, size_t count, int32_t dtype);

// out[i] = g * (Phi(x) + x * phi(x)), phi the normal density: GELU's gradient, as gelu.
void gelu_backward(void* out, const void* g, const void* x, size_t count, int32_t dtype);

// out = g * (x > 0): ReLU's gradient, the bits of numpy's multiply by the cast mask.
void relu_backward(void* out, const void* g, const void* x, size_t count, int32_t dtype);

}  // namespace gt
