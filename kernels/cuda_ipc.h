// CUDA device memory, IPC handles and the reduction kernel of the IPC all-reduce.
// Plain C++ interface (no CUDA headers): streams are cudaStream_t values passed as integers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {
namespace cuda {

constexpr int kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
constexpr int kMaxSources = 16;      // ranks whose buffers one reduction reads

int device_count();                  // 0 when there is no driver or no device
void set_device(int device);
void* malloc_device(size_t nbytes);
void free_device(void* ptr);
// The IPC handle of a cudaMalloc'd pointer; another process opens it with ipc_open.
void ipc_handle(const void* ptr, char handle[kIpcHandleBytes]);
void* ipc_open(const char handle[kIpcHandleBytes]);
void ipc_close(void* ptr);
void copy_async(void* dst, const void* src, size_t nbytes, uintptr_t stream);
// dst[i] = srcs[0][i] + ... + srcs[n-1][i] for i < count, summed in that order (float16 and
// bfloat16 accumulate in float32); dst may be one of the sources. dtype: gt::DType.
void reduce_sum_async(void* dst, const void* const* srcs, int n, size_t count, int32_t dtype, uintptr_t stream);
void synchronize(uintptr_t stream);

}  // namespace cuda
}  // namespace gt
