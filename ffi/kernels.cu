// vagen's fused CUDA kernels; see kernels.h for what each computes and why.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace vt::kernels {
namespace {

template <typename T>
__device__ __forceinline__ float load(const T* p) {
  return static_cast<float>(*p);
}
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <>
__device__ __forceinline__ float load<__half>(const __half* p) {
  return __half2float(*p);
}

template <typename T>
__device__ __forceinline__ T cast(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half cast<__half>(float x) {
  return __float2half_rn(x);
}

// What a libtorch op on T tensors leaves behind: the float32 result rounded to T.
template <typename T>
__device__ __forceinline__ float rounded(float x) {
  T r = cast<T>(x);
  return load(&r);
}

constexpr int kNormThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One block per row.
template <typename T>
__global__ void add_rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ residual,
                                    const T* __restrict__ weight, T* __restrict__ sum_out, T* __restrict__ norm_out,
                                    int64_t hidden, float eps) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  float squares = 0.f;
  for (int64_t i = threadIdx.x; i < hidden; i += kNormThreads) {
    float v = load(x + base + i);
    if (residual != nullptr) {
      v = rounded<T>(v + load(residual + base + i));
      sum_out[base + i] = cast<T>(v);
    }
    squares += v * v;
  }
  __shared__ float partial[kNormThreads / 32];
  __shared__ float inv_rms;
  squares = warp_sum(squares);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = squares;
  __syncthreads();
  if (warp == 0) {
    float total = lane < kNormThreads / 32 ? partial[lane] : 0.f;
    total = warp_sum(total);
    if (lane == 0) inv_rms = rsqrtf(total / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  const float r = inv_rms;
  // Each thread reads back only what it wrote itself, so no further barrier is needed.
  const T* s = residual != nullptr ? sum_out : x;
  for (int64_t i = threadIdx.x; i < hidden; i += kNormThreads) {
    const float y = rounded<T>(load(s + base + i) * r);
    norm_out[base + i] = cast<T>(weight != nullptr ? load(weight + i) * y : y);
  }
}

template <typename T>
__global__ void rotary_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ cos,
                              const T* __restrict__ sin, T* __restrict__ q_out, T* __restrict__ k_out, int64_t tokens,
                              int64_t q_heads, int64_t k_heads, int64_t dim, int64_t q_row, int64_t k_row) {
  const int64_t heads = q_heads + k_heads;
  const int64_t n = tokens * heads * dim;
  const int64_t half = dim / 2;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = idx % dim;
    const int64_t head = (idx / dim) % heads;
    const int64_t token = idx / (dim * heads);
    const bool is_q = head < q_heads;
    const int64_t h = is_q ? head : head - q_heads;
    const T* src = (is_q ? q + token * q_row : k + token * k_row) + h * dim;
    T* dst = (is_q ? q_out + token * q_heads * dim : k_out + token * k_heads * dim) + h * dim;
    const float partner = d < half ? -load(src + d + half) : load(src + d - half);
    const float a = rounded<T>(load(src + d) * load(cos + token * dim + d));
    const float b = rounded<T>(partner * load(sin + token * dim + d));
    dst[d] = cast<T>(a + b);
  }
}

template <typename T>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out, int64_t rows,
                                int64_t cols, int64_t in_row) {
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = (i / cols) * in_row + i % cols;
    const float g = load(gate + at);
    const float act = rounded<T>(g / (1.f + expf(-g)));
    out[i] = cast<T>(act * load(up + at));
  }
}

const char* launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

unsigned elementwise_blocks(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

// Calls fn with a typed null pointer selecting the storage type.
template <typename Fn>
const char* dispatch(Dtype dtype, Fn&& fn) {
  switch (dtype) {
    case Dtype::F32:
      fn(static_cast<float*>(nullptr));
      break;
    case Dtype::BF16:
      fn(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case Dtype::F16:
      fn(static_cast<__half*>(nullptr));
      break;
    default:
      return "unsupported dtype for a fused kernel";
  }
  return launched();
}

}  // namespace

const char* add_rms_norm(Dtype dtype, const void* x, const void* residual, const void* weight, void* sum_out,
                         void* norm_out, int64_t rows, int64_t hidden, float eps, void* stream) {
  if (rows == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    add_rms_norm_kernel<T><<<static_cast<unsigned>(rows), kNormThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(residual), static_cast<const T*>(weight),
        static_cast<T*>(sum_out), static_cast<T*>(norm_out), hidden, eps);
  });
}

const char* rotary(Dtype dtype, const void* q, const void* k, const void* cos, const void* sin, void* q_out,
                   void* k_out, int64_t tokens, int64_t q_heads, int64_t k_heads, int64_t dim, int64_t q_row,
                   int64_t k_row, void* stream) {
  const int64_t n = tokens * (q_heads + k_heads) * dim;
  if (n == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    rotary_kernel<T><<<elementwise_blocks(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(cos), static_cast<const T*>(sin),
        static_cast<T*>(q_out), static_cast<T*>(k_out), tokens, q_heads, k_heads, dim, q_row, k_row);
  });
}

const char* silu_mul(Dtype dtype, const void* gate, const void* up, void* out, int64_t rows, int64_t cols,
                     int64_t in_row, void* stream) {
  const int64_t n = rows * cols;
  if (n == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    silu_mul_kernel<T><<<elementwise_blocks(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), rows, cols, in_row);
  });
}

}  // namespace vt::kernels
