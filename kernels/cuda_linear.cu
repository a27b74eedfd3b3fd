// cuBLASLt behind row-major calls: matmul, the fused linear layer and its weight gradient.
// Each op is one cublasLtMatmul on the column-major view of its buffers (a row-major m x n
// matrix is a column-major n x m one), with the epilogue fused:
//   matmul          C^T (n x m)  = B^T . A^T
//   linear forward  Y^T (n x m)  = act(W . X^T + bias)     bias per row of Y^T: per output feature
//   weight grad     dW^T (k x n) = X^T . G, dbias = sum of G over the k dimension (BGRADB)
// Descriptors, layouts and the heuristic's algorithm are cached per shape and per the
// alignment of each pointer (pieces are often views at any offset: the algorithm must not assume
// 256-byte aligned buffers that are not); one 32 MiB workspace per device. libcublasLt is opened with dlopen, so _native does not depend on it.
#include "cuda_linear.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "types.h"

namespace gt {
namespace cuda {

namespace {

#define GT_LT_FUNCTIONS(X)                                                                  \
  X(cublasLtCreate) X(cublasLtGetStatusName) X(cublasLtMatmulDescCreate)                    \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)                           \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute)                 \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct Lt {
#define GT_DECLARE(name) decltype(&::name) name = nullptr;
  GT_LT_FUNCTIONS(GT_DECLARE)
#undef GT_DECLARE
  void* lib = nullptr;
};

std::mutex mu;
Lt lt;

bool open_lt(const std::string& path) {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  void* lib = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  for (const char* n : names)
    if (!lib && path.empty()) lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  Lt next;
  next.lib = lib;
#define GT_RESOLVE(name)                                                 \
  next.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (!next.name) return false;
  GT_LT_FUNCTIONS(GT_RESOLVE)
#undef GT_RESOLVE
  lt = next;
  return true;
}

void check_cuda(cudaError_t code, const char* what) {
  if (code != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(code));
}

void check_lt(cublasStatus_t code, const char* what) {
  if (code != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + (lt.cublasLtGetStatusName ? lt.cublasLtGetStatusName(code) : "error") +
                             " (" + std::to_string(int(code)) + ")");
}

struct Types {
  cudaDataType data, scale;
  cublasComputeType_t compute;
};

Types types_of(int32_t dtype, bool tf32) {
  switch (dtype) {
    case kF32: return {CUDA_R_32F, CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case kF64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case kF16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case kBF16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default: throw std::invalid_argument("cuBLASLt matmul takes float32, float64, float16 or bfloat16");
  }
}

// One column-major product D (rows x cols) = op(A) . op(B), with an epilogue.
struct Problem {
  int device;
  int64_t rows, cols, depth;
  bool trans_a, trans_b;
  int64_t lda, ldb;
  int32_t dtype;
  bool tf32;
  cublasLtEpilogue_t epilogue;
  uint32_t align_a = 256, align_b = 256, align_d = 256, align_bias = 256;  // bytes, set by run()
  bool operator<(const Problem& o) const {
    return std::tie(device, rows, cols, depth, trans_a, trans_b, lda, ldb, dtype, tf32, epilogue, align_a, align_b,
                    align_d, align_bias) <
           std::tie(o.device, o.rows, o.cols, o.depth, o.trans_a, o.trans_b, o.lda, o.ldb, o.dtype, o.tf32, o.epilogue,
                    o.align_a, o.align_b, o.align_d, o.align_bias);
  }
};

// The largest power of two (at most 256) that divides the address.
uint32_t alignment(const void* ptr) {
  uintptr_t v = reinterpret_cast<uintptr_t>(ptr);
  return v == 0 ? 256u : uint32_t(std::min<uintptr_t>(v & (~v + 1), 256));
}

struct Plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
};

constexpr size_t kWorkspaceBytes = 32u << 20;

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

std::map<int, DeviceState> devices;
std::map<Problem, Plan> plans;

DeviceState& device_state(int device) {
  DeviceState& s = devices[device];
  if (!s.handle) {
    check_lt(lt.cublasLtCreate(&s.handle), "cublasLtCreate");
    check_cuda(cudaMalloc(&s.workspace, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  }
  return s;
}

Plan& plan_for(const Problem& p, cublasLtHandle_t handle) {
  auto found = plans.find(p);
  if (found != plans.end()) return found->second;
  Types t = types_of(p.dtype, p.tf32);
  Plan plan{};
  check_lt(lt.cublasLtMatmulDescCreate(&plan.desc, t.compute, t.scale), "cublasLtMatmulDescCreate");
  cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
  check_lt(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
  cublasLtEpilogue_t epi = p.epilogue;
  check_lt(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");
  // stored shapes: op(A) is rows x depth, op(B) is depth x cols
  int64_t a_rows = p.trans_a ? p.depth : p.rows, a_cols = p.trans_a ? p.rows : p.depth;
  int64_t b_rows = p.trans_b ? p.cols : p.depth, b_cols = p.trans_b ? p.depth : p.cols;
  check_lt(lt.cublasLtMatrixLayoutCreate(&plan.a, t.data, a_rows, a_cols, p.lda), "layout A");
  check_lt(lt.cublasLtMatrixLayoutCreate(&plan.b, t.data, b_rows, b_cols, p.ldb), "layout B");
  check_lt(lt.cublasLtMatrixLayoutCreate(&plan.d, t.data, p.rows, p.cols, p.rows), "layout D");
  cublasLtMatmulPreference_t pref;
  check_lt(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  size_t ws = kWorkspaceBytes;
  check_lt(lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "MAX_WORKSPACE_BYTES");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_a}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_d}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_d}};
  for (auto& [attr, bytes] : aligns)
    check_lt(lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)), "MIN_ALIGNMENT");
  // The heuristic looks at the bias pointer's alignment: plan with one aligned as the real one is.
  if (epi != CUBLASLT_EPILOGUE_DEFAULT && epi != CUBLASLT_EPILOGUE_RELU && epi != CUBLASLT_EPILOGUE_GELU) {
    const void* aligned = reinterpret_cast<const void*>(uintptr_t(p.align_bias));
    lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &aligned, sizeof(aligned));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  check_lt(lt.cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1, &result,
                                              &found_count),
           "cublasLtMatmulAlgoGetHeuristic");
  if (found_count == 0) throw std::runtime_error("cuBLASLt found no algorithm for this matmul");
  plan.algo = result.algo;
  return plans.emplace(p, plan).first->second;
}

void run(Problem p, void* d, const void* a, const void* b, const void* bias, uintptr_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  if (!lt.lib && !open_lt("")) throw std::runtime_error("libcublasLt was not found: install nvidia-cublas or set the path");
  p.align_a = alignment(a);
  p.align_b = alignment(b);
  p.align_d = alignment(d);
  p.align_bias = alignment(bias);
  DeviceState& s = device_state(p.device);
  Plan& plan = plan_for(p, s.handle);
  if (bias) check_lt(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                     "BIAS_POINTER");
  double one64 = 1.0, zero64 = 0.0;
  float one32 = 1.f, zero32 = 0.f;
  bool f64 = p.dtype == kF64;
  check_lt(lt.cublasLtMatmul(s.handle, plan.desc, f64 ? static_cast<const void*>(&one64) : &one32, a, plan.a, b, plan.b,
                             f64 ? static_cast<const void*>(&zero64) : &zero32, d, plan.d, d, plan.d, &plan.algo,
                             s.workspace, kWorkspaceBytes, reinterpret_cast<cudaStream_t>(stream)),
           "cublasLtMatmul");
}

int current_device() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

cublasLtEpilogue_t forward_epilogue(int32_t activation, bool bias) {
  switch (activation) {
    case kIdentity: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case kRelu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case kGeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: throw std::invalid_argument("activation must be identity, relu or gelu (tanh)");
  }
}

}  // namespace

bool load_cublaslt(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu);
  return lt.lib != nullptr || open_lt(path);
}

void matmul(void* c, const void* a, const void* b, int64_t m, int64_t n, int64_t k, int32_t dtype, bool tf32,
            uintptr_t stream) {
  Problem p{current_device(), n, m, k, false, false, n, k, dtype, tf32, CUBLASLT_EPILOGUE_DEFAULT};
  run(p, c, b, a, nullptr, stream);
}

void linear_forward(void* y, const void* x, const void* w, const void* bias, int64_t m, int64_t n, int64_t k,
                    int32_t dtype, int32_t activation, bool tf32, uintptr_t stream) {
  Problem p{current_device(), n, m, k, true, false, k, k, dtype, tf32, forward_epilogue(activation, bias != nullptr)};
  run(p, y, w, x, bias, stream);
}

void linear_weight_grad(void* dw, void* dbias, const void* g, const void* x, int64_t m, int64_t n, int64_t k,
                        int32_t dtype, bool tf32, uintptr_t stream) {
  Problem p{current_device(), k, n, m, false, true, k, n, dtype, tf32,
            dbias ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT};
  run(p, dw, x, g, dbias, stream);
}

}  // namespace cuda
}  // namespace gt
