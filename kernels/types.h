// Plain value types shared by the kernels: dtypes, reduction ops, errors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gt {

enum DType : int32_t { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3, kI32 = 4, kI64 = 5, kBytes = 6 };
enum RedOp : int32_t { kSum = 0, kMax = 1, kMin = 2 };

inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case kF32: case kI32: return 4;
    case kF64: case kI64: return 8;
    case kF16: case kBF16: return 2;
    default: return 1;
  }
}

const char* dtype_name(int32_t dtype);
const char* redop_name(int32_t redop);

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
