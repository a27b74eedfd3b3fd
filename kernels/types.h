// Plain value types shared by the kernels: dtypes, reduction ops, errors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gt {

// The element types and reduction ops, numbered here once: bindings/module.cpp exports both
// tables to Python as _native.DType and _native.RedOp (members named as below), and every code Python
// passes or sends between ranks is one of these.
enum DType : int32_t {
  kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3, kI32 = 4, kI64 = 5, kBool = 6, kI8 = 7, kU8 = 8, kC64 = 9, kC128 = 10
};
constexpr int32_t kNumDTypes = 11;
// The names, by code: numpy's (bfloat16 is ml_dtypes').
inline constexpr const char* kDTypeNames[kNumDTypes] = {"float32", "float64", "float16", "bfloat16", "int32",
                                                        "int64",   "bool",    "int8",    "uint8",
                                                        "complex64", "complex128"};

// avg: the sum divided by the number of sources, float types only (gradient buckets' mean: one
// pass fewer than a sum and a division); Python keeps it private (collectives.py's _REDOPS).
enum RedOp : int32_t { kSum = 0, kMax = 1, kMin = 2, kAvg = 3 };
constexpr int32_t kNumRedOps = 4;
inline constexpr const char* kRedOpNames[kNumRedOps] = {"sum", "max", "min", "avg"};

inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case kF32: case kI32: return 4;
    case kF64: case kI64: case kC64: return 8;
    case kC128: return 16;
    case kF16: case kBF16: return 2;
    default: return 1;
  }
}

// Whether the arithmetic kernels take this type: reductions (reduce_to, the CUDA sum) and random
// fills (philox_fill). The others (bool, int8, uint8) are only moved, as bytes.
inline bool is_arithmetic(int32_t dtype) { return dtype >= kF32 && dtype <= kI64; }

// Complex types are summed as their (real, imaginary) float pairs: the float type a sum of `dtype`
// runs in (the dtype itself for the others). MAX and MIN of complex are undefined (not ordered).
inline bool is_complex(int32_t dtype) { return dtype == kC64 || dtype == kC128; }
inline int32_t summed_as(int32_t dtype) { return dtype == kC64 ? kF32 : dtype == kC128 ? kF64 : dtype; }

inline const char* dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < kNumDTypes ? kDTypeNames[dtype] : "unknown";
}
inline const char* redop_name(int32_t redop) {
  return redop >= 0 && redop < kNumRedOps ? kRedOpNames[redop] : "unknown";
}

// Any failure of a collective that every rank of the group detects alike.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A peer did not arrive within the timeout, or its process is gone.
struct CollectiveTimeout : CollectiveError {
  using CollectiveError::CollectiveError;
};
// Shared memory could not be reserved (/dev/shm full).
struct ShmExhausted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace gt
