// Adam's and AdamW's update in one pass over memory (the optimizers' adam_update / adamw_update).
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// The scalars of one update, as Python computes them in double; each is rounded to the dtype
// where numpy's `array (op) python float` would round it.
struct AdamScalars {
  double b1, b2, eps, weight_decay;
  double decay_factor;  // AdamW: 1 - lr * weight_decay (w *= it first); 1 otherwise
  double step_size;     // lr / (1 - b1 ** step)
  double bias2;         // 1 - b2 ** step
  bool decoupled;       // AdamW (decay_factor) rather than L2 (g + weight_decay * w)
};

// In place over count elements of w, m, v (and vmax with amsgrad; nullptr without): element by
// element the operations of optim/updates.py's numpy _adam in its order, each rounded to the dtype
// (float32 kF32 or float64 kF64), so the bits are numpy's.
void adam_update(void* w, const void* g, void* m, void* v, void* vmax, size_t count, int32_t dtype,
                 const AdamScalars& s);

}  // namespace gt
