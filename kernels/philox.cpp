// Philox4x32-10 (Salmon et al., SC'11) and the distributions built on its words.
#include "philox.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "half.h"
#include "types.h"

namespace gt {

namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  *lo = uint32_t(p);
}

template <typename T> inline void store(void* out, int64_t i, double v, int32_t dtype) {
  (void)dtype;
  static_cast<T*>(out)[i] = T(v);
}

void store_value(void* out, int64_t i, double v, int32_t dtype) {
  switch (dtype) {
    case kF32: return store<float>(out, i, v, dtype);
    case kF64: return store<double>(out, i, v, dtype);
    case kI32: return store<int32_t>(out, i, v, dtype);
    case kI64: return store<int64_t>(out, i, v, dtype);
    case kF16: static_cast<uint16_t*>(out)[i] = float_to_half(float(v)); return;
    case kBF16: static_cast<uint16_t*>(out)[i] = float_to_bf16(float(v)); return;
    default: static_cast<uint8_t*>(out)[i] = uint8_t(v); return;
  }
}

// One value from the four words of element i.
double draw(const uint32_t w[4], int32_t kind, int32_t dtype, double a, double b) {
  bool wide = dtype == kF64;
  switch (kind) {
    case kUniform: {
      double u = wide ? double((uint64_t(w[0]) << 21) ^ (w[1] >> 11)) * 0x1.0p-53 : double(w[0] >> 8) * 0x1.0p-24;
      double v = a + (b - a) * u;
      return (!wide && v >= b) ? std::nextafter(float(b), float(a)) : v;  // stay below b after rounding
    }
    case kNormal: {  // Box-Muller, cosine branch; u1 in (0, 1]
      double u1 = (double(w[0]) + 1.0) * 0x1.0p-32, u2 = double(w[1]) * 0x1.0p-32;
      return a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    case kRandint: {  // Lemire's multiply-shift on 64 random bits: bias below range / 2^64
      uint64_t range = uint64_t(int64_t(b) - int64_t(a));
      uint64_t x = (uint64_t(w[0]) << 32) | w[1];
      return double(int64_t(a) + int64_t(uint64_t((__uint128_t(x) * range) >> 64)));
    }
    default:  // bernoulli
      return double(w[0]) * 0x1.0p-32 < a ? 1.0 : 0.0;
  }
}

}  // namespace

void philox4x32(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c0, &hi0, &lo0);
    mulhilo(kMul1, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void philox_fill(void* out, int32_t dtype, int32_t kind, RandomBox box, uint64_t seed, uint64_t counter,
                 double a, double b) {
  if (kind == kRandint && !(b > a)) throw std::invalid_argument("randint needs high > low");
  if (kind == kRandint && dtype != kI32 && dtype != kI64)
    throw std::invalid_argument("randint fills int32 or int64");
  int64_t total = 1;
  for (int d = 0; d < box.ndim; ++d) total *= box.local_shape[d];
  if (total == 0) return;
  const uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  int64_t idx[32] = {0};
  if (box.ndim > 32) throw std::invalid_argument("at most 32 dimensions");
  for (int64_t i = 0; i < total; ++i) {
    int64_t flat = 0;  // the element's index in the global tensor, C order
    for (int d = 0; d < box.ndim; ++d) flat = flat * box.global_shape[d] + box.starts[d] + idx[d];
    const uint32_t ctr[4] = {uint32_t(flat), uint32_t(uint64_t(flat) >> 32), uint32_t(counter),
                             uint32_t(counter >> 32)};
    uint32_t w[4];
    philox4x32(ctr, key, w);
    store_value(out, i, draw(w, kind, dtype, a, b), dtype);
    for (int d = box.ndim - 1; d >= 0; --d) {  // odometer over the piece
      if (++idx[d] < box.local_shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace gt
