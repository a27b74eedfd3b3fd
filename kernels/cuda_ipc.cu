// CUDA side of the IPC all-reduce: device memory, IPC handles, and the n-way sum kernel.
// Synchronisation between processes is the host's (see distributed/ipc_allreduce.py): every
// kernel here reads buffers that were complete before it was launched, so none waits on
// another process.
#include "cuda_ipc.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "types.h"

namespace gt {
namespace cuda {

namespace {

void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
}

struct Sources {
  const void* ptr[kMaxSources];
  int n;
};

template <typename T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };

template <typename T> __device__ typename Acc<T>::type widen(T v) { return v; }
template <> __device__ float widen(__half v) { return __half2float(v); }
template <> __device__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ T narrow(typename Acc<T>::type v) { return v; }
template <> __device__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void sum_kernel(T* __restrict__ dst, Sources srcs, size_t count) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    typename Acc<T>::type acc = widen(static_cast<const T*>(srcs.ptr[0])[i]);
    for (int s = 1; s < srcs.n; ++s) acc += widen(static_cast<const T*>(srcs.ptr[s])[i]);
    dst[i] = narrow<T>(acc);
  }
}

template <typename T>
void launch_sum(void* dst, const Sources& srcs, size_t count, cudaStream_t stream) {
  int threads = 256;
  size_t blocks = (count + threads - 1) / threads;
  if (blocks > 65535) blocks = 65535;  // grid-stride beyond
  sum_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(static_cast<T*>(dst), srcs, count);
  check(cudaGetLastError(), "reduce_sum_async launch");
}

cudaStream_t as_stream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

void* malloc_device(size_t nbytes) {
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, nbytes ? nbytes : 1), "cudaMalloc");
  return ptr;
}

void free_device(void* ptr) { check(cudaFree(ptr), "cudaFree"); }

void ipc_handle(const void* ptr, char handle[kIpcHandleBytes]) {
  static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "cudaIpcMemHandle_t size");
  cudaIpcMemHandle_t h;
  check(cudaIpcGetMemHandle(&h, const_cast<void*>(ptr)), "cudaIpcGetMemHandle");
  memcpy(handle, &h, kIpcHandleBytes);
}

void* ipc_open(const char handle[kIpcHandleBytes]) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, kIpcHandleBytes);
  void* ptr = nullptr;
  check(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  return ptr;
}

void ipc_close(void* ptr) { check(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle"); }

void copy_async(void* dst, const void* src, size_t nbytes, uintptr_t stream) {
  if (nbytes) check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
}

void reduce_sum_async(void* dst, const void* const* srcs, int n, size_t count, int32_t dtype, uintptr_t stream) {
  if (n < 1 || n > kMaxSources) throw std::invalid_argument("reduce_sum_async: 1 to 16 sources");
  if (count == 0) return;
  Sources s{};
  for (int i = 0; i < n; ++i) s.ptr[i] = srcs[i];
  s.n = n;
  cudaStream_t st = as_stream(stream);
  switch (dtype) {
    case kF32: return launch_sum<float>(dst, s, count, st);
    case kF64: return launch_sum<double>(dst, s, count, st);
    case kF16: return launch_sum<__half>(dst, s, count, st);
    case kBF16: return launch_sum<__nv_bfloat16>(dst, s, count, st);
    case kI32: return launch_sum<int32_t>(dst, s, count, st);
    case kI64: return launch_sum<int64_t>(dst, s, count, st);
    default: throw std::invalid_argument("reduce_sum_async: unsupported dtype");
  }
}

void synchronize(uintptr_t stream) { check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize"); }

}  // namespace cuda
}  // namespace gt
