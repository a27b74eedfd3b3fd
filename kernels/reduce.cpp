// Reduction kernels: blocked so the accumulator stays in L1, then stored (optionally streamed).
#include "reduce.h"

#include "half.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gt {

namespace {

#if defined(__x86_64__)
// 16-byte loads wherever src falls, aligned 16-byte stores (streaming ones when asked), 64 bytes a step.
void copy_sse(char* d, const char* s, size_t nbytes, bool nontemporal) {
  size_t head = std::min(nbytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head; s += head; nbytes -= head;
  size_t body = nbytes & ~size_t(63);
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    auto* o = reinterpret_cast<__m128i*>(d + i);
    if (nontemporal) {
      _mm_stream_si128(o, a); _mm_stream_si128(o + 1, b); _mm_stream_si128(o + 2, c); _mm_stream_si128(o + 3, e);
    } else {
      _mm_store_si128(o, a); _mm_store_si128(o + 1, b); _mm_store_si128(o + 2, c); _mm_store_si128(o + 3, e);
    }
  }
  std::memcpy(d + body, s + body, nbytes - body);
  if (nontemporal) _mm_sfence();
}
#endif

}  // namespace

void copy_bytes(void* dst, const void* src, size_t nbytes, bool nontemporal) {
  if (dst == src || nbytes == 0) return;
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  if (nontemporal && nbytes >= 256) return copy_sse(d, s, nbytes, true);
  // glibc's memcpy moves 4 KiB up to the L2's size with `rep movsb`, which on AMD Zen 3 runs 10-20x
  // slower when source and destination are 8-24 bytes apart modulo 64 (a bytearray's or a malloc'd
  // array's data against an arena's: 256 KiB in 87 us against 6.5; RESULTS.md "Issue 34 (s13)").
  if (nbytes >= 2048 && ((reinterpret_cast<uintptr_t>(d) - reinterpret_cast<uintptr_t>(s)) & 63) != 0)
    return copy_sse(d, s, nbytes, false);
#endif
  (void)nontemporal;
  std::memcpy(dst, src, nbytes);
}

namespace {

// Storage type T, accumulator type A; load/store convert between them.
template <typename T, typename A> struct Plain {
  static A load(const T& v) { return A(v); }
  static T store(A v) { return T(v); }
};
struct Half {
  static float load(uint16_t v) { return half_to_float(v); }
  static uint16_t store(float v) { return float_to_half(v); }
};
struct BHalf {
  static float load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16(v); }
};

template <typename A> inline A combine(A a, A b, int32_t redop) {
  if (redop == kSum || redop == kAvg) return a + b;
  if (redop == kMax) return (b > a || b != b) ? b : a;  // NaN propagates
  return (b < a || b != b) ? b : a;
}
// Integer sums wrap instead of overflowing into undefined behaviour.
template <> inline int32_t combine(int32_t a, int32_t b, int32_t redop) {
  if (redop == kSum) return int32_t(uint32_t(a) + uint32_t(b));
  return redop == kMax ? std::max(a, b) : std::min(a, b);
}
template <> inline int64_t combine(int64_t a, int64_t b, int32_t redop) {
  if (redop == kSum) return int64_t(uint64_t(a) + uint64_t(b));
  return redop == kMax ? std::max(a, b) : std::min(a, b);
}

// acc[i] = first[i] (op) second[i], or acc[i] = acc[i] (op) second[i] when first == acc.
template <typename T, typename A, typename Conv, int R>
inline void combine_pass(A* __restrict acc, const T* __restrict first, const T* __restrict second, size_t n,
                         bool first_is_acc) {
  if (first_is_acc) {
#pragma GCC unroll 4
    for (size_t i = 0; i < n; ++i) acc[i] = combine<A>(acc[i], Conv::load(second[i]), R);
  } else {
#pragma GCC unroll 4
    for (size_t i = 0; i < n; ++i) acc[i] = combine<A>(Conv::load(first[i]), Conv::load(second[i]), R);
  }
}

constexpr size_t kBlockBytes = 8192;

// One block: sources combine pairwise into an L1-resident accumulator, which is then stored
// to every destination; when T == A the accumulator is itself the stored block.
template <typename T, typename A, typename Conv, int R>
void reduce_blocks(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
                   bool nontemporal) {
  constexpr size_t kBlock = kBlockBytes / sizeof(A);
  constexpr bool kSame = std::is_same<T, A>::value;
  alignas(64) A block_acc[kBlock];
  alignas(64) T out[kSame ? 1 : kBlock];
  // One destination of the accumulator's type, written with ordinary stores: the block is summed in it
  // directly, no copy after (the same operations in the same order).
  bool in_place = kSame && ndst == 1 && !nontemporal && nsrc > 1;
  auto d0 = static_cast<const char*>(dsts[0]);
  for (int p = 0; p < nsrc && in_place; ++p) {  // no source may share its memory (all_reduce in place)
    auto sp = static_cast<const char*>(srcs[p]);
    in_place = sp + count * sizeof(T) <= d0 || d0 + count * sizeof(T) <= sp;
  }
  for (size_t lo = 0; lo < count; lo += kBlock) {
    size_t n = std::min(kBlock, count - lo);
    A* acc = in_place ? reinterpret_cast<A*>(static_cast<T*>(dsts[0]) + lo) : block_acc;
    const T* s0 = static_cast<const T*>(srcs[0]) + lo;
    if (nsrc == 1) {
      for (size_t i = 0; i < n; ++i) acc[i] = Conv::load(s0[i]);
    } else {
      combine_pass<T, A, Conv, R>(acc, s0, static_cast<const T*>(srcs[1]) + lo, n, false);
    }
    for (int p = 2; p < nsrc; ++p)
      combine_pass<T, A, Conv, R>(acc, nullptr, static_cast<const T*>(srcs[p]) + lo, n, true);
    if constexpr (R == kAvg) {  // IEEE division by the count, as numpy's `sum /= k` (the same bits)
      const A k = A(nsrc);
      for (size_t i = 0; i < n; ++i) acc[i] = acc[i] / k;
    }
    if (in_place) continue;
    const void* block = acc;
    if constexpr (!kSame) {
      for (size_t i = 0; i < n; ++i) out[i] = Conv::store(acc[i]);
      block = out;
    }
    for (int d = 0; d < ndst; ++d)
      copy_bytes(static_cast<T*>(dsts[d]) + lo, block, n * sizeof(T), nontemporal);
  }
}

template <typename T, typename A, typename Conv>
void reduce_typed(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
                  int32_t redop, bool nontemporal) {
  if (redop == kSum) reduce_blocks<T, A, Conv, kSum>(dsts, ndst, srcs, nsrc, count, nontemporal);
  else if (redop == kMax) reduce_blocks<T, A, Conv, kMax>(dsts, ndst, srcs, nsrc, count, nontemporal);
  else if (redop == kAvg) reduce_blocks<T, A, Conv, kAvg>(dsts, ndst, srcs, nsrc, count, nontemporal);
  else reduce_blocks<T, A, Conv, kMin>(dsts, ndst, srcs, nsrc, count, nontemporal);
}

}  // namespace

void reduce_to(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
               int32_t dtype, int32_t redop, bool nontemporal) {
  if (redop == kAvg && (dtype == kI32 || dtype == kI64))
    throw std::invalid_argument(std::string("avg reduces float types only, not ") + dtype_name(dtype));
  if (count == 0 || nsrc == 0) return;
  switch (dtype) {
    case kF32: return reduce_typed<float, float, Plain<float, float>>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    case kF64: return reduce_typed<double, double, Plain<double, double>>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    case kI32: return reduce_typed<int32_t, int32_t, Plain<int32_t, int32_t>>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    case kI64: return reduce_typed<int64_t, int64_t, Plain<int64_t, int64_t>>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    case kF16: return reduce_typed<uint16_t, float, Half>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    case kBF16: return reduce_typed<uint16_t, float, BHalf>(dsts, ndst, srcs, nsrc, count, redop, nontemporal);
    default: throw std::invalid_argument(std::string("cannot reduce dtype ") + dtype_name(dtype));
  }
}

}  // namespace gt
