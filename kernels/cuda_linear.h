// Matmul and fused linear layers on the GPU through cuBLASLt (opened with dlopen on first use).
// Row-major buffers, plain C++ interface: pointers and streams are integers on the Python side.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace gt {
namespace cuda {

enum Activation : int32_t { kIdentity = 0, kRelu = 1, kGeluTanh = 2 };

// Open libcublasLt from `path` (empty: the loader's search path); false when it is not there.
bool load_cublaslt(const std::string& path);
// c (m x n) = a (m x k) @ b (k x n).
void matmul(void* c, const void* a, const void* b, int64_t m, int64_t n, int64_t k, int32_t dtype, bool tf32,
            uintptr_t stream);
// y (m x n) = act(x (m x k) @ w^T + bias), w (n x k) as nn.Linear keeps it; bias may be null.
void linear_forward(void* y, const void* x, const void* w, const void* bias, int64_t m, int64_t n, int64_t k,
                    int32_t dtype, int32_t activation, bool tf32, uintptr_t stream);
// dw (n x k) = g^T @ x for g (m x n), x (m x k); dbias (n) = g summed over rows, in the same call
// (the BGRADB epilogue) when not null.
void linear_weight_grad(void* dw, void* dbias, const void* g, const void* x, int64_t m, int64_t n, int64_t k,
                        int32_t dtype, bool tf32, uintptr_t stream);

}  // namespace cuda
}  // namespace gt
