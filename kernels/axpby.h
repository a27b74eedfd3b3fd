// y = b * y + a * x in place, one pass over memory (the optimizers' update).
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// float32 (kF32) or float64 (kF64). Each product is rounded to the dtype, then the sum,
// as numpy's `y *= b; y += a * x` would; b == 1 skips its multiply (exact anyway).
void axpby(void* y, const void* x, double a, double b, size_t count, int32_t dtype);

}  // namespace gt
