// Counter-based random numbers: element i of a global tensor depends on (seed, counter, i) only.
#pragma once
#include <cstdint>

namespace gt {

enum RandomKind : int32_t { kUniform = 0, kNormal = 1, kRandint = 2, kBernoulli = 3 };

struct RandomBox {
  int ndim;
  const int64_t* global_shape;  // the whole tensor
  const int64_t* starts;        // where this piece begins, per dim
  const int64_t* local_shape;   // the piece
};

// Fills `out` (the piece, C order) with values of `kind` for each element's global flat index.
// uniform: [a, b); normal: mean a, std b; randint: [a, b) (int32/int64); bernoulli: 1 with
// probability a. float dtypes: f32, f64, f16, bf16 (computed in f32/f64, rounded once).
void philox_fill(void* out, int32_t dtype, int32_t kind, RandomBox box, uint64_t seed, uint64_t counter,
                 double a, double b);

// The four 32-bit words of Philox4x32-10 for (counter words, key words).
void philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

}  // namespace gt
