// vagen's fused CUDA kernels; see kernels.h for what each computes and why.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
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


// ---- decode attention over the slot KV cache ---------------------------------------

constexpr int kAttnWarps = 8;
// Keys one warp loads before using them, so several loads are in flight at once.
constexpr int kAttnKeysPerStep = 4;

// One block per (row, kv head); warp w takes keys w, w + 8, ...; lane l holds dims
// [l * D / 32, (l + 1) * D / 32) of q, k, v and the output for all G query heads.
template <typename T, int D, int G>
__global__ void __launch_bounds__(kAttnWarps * 32)
    slot_decode_attention_kernel(const T* __restrict__ q, const T* __restrict__ k_new, const T* __restrict__ v_new,
                                 T* __restrict__ k_cache, T* __restrict__ v_cache,
                                 const int64_t* __restrict__ write_index, T* __restrict__ out, int64_t k_row,
                                 int64_t v_row, int64_t slot_tokens, int kv_heads, float scale) {
  constexpr int kDims = D / 32;
  const int b = blockIdx.x;
  const int h = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t flat = write_index[b];
  const int64_t pos = flat % slot_tokens;
  const int64_t first = flat - pos;  // token row of position 0 of this slot
  const int64_t length = pos + 1;

  // The new key and value go into the cache first; after the barrier every warp reads
  // them back like any other position.
  if (warp == 0) {
    for (int i = lane; i < D; i += 32) {
      k_cache[(flat * kv_heads + h) * D + i] = k_new[b * k_row + h * D + i];
      v_cache[(flat * kv_heads + h) * D + i] = v_new[b * v_row + h * D + i];
    }
  }
  __syncthreads();

  float qr[G][kDims];
#pragma unroll
  for (int g = 0; g < G; g++)
#pragma unroll
    for (int i = 0; i < kDims; i++) qr[g][i] = load(q + ((static_cast<int64_t>(b) * kv_heads + h) * G + g) * D + lane * kDims + i) * scale;

  float m[G], l[G], acc[G][kDims];
#pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < kDims; i++) acc[g][i] = 0.f;
  }

  for (int64_t j0 = warp; j0 < length; j0 += kAttnWarps * kAttnKeysPerStep) {
    float kk[kAttnKeysPerStep][kDims];
    float vv[kAttnKeysPerStep][kDims];
#pragma unroll
    for (int u = 0; u < kAttnKeysPerStep; u++) {
      const int64_t j = j0 + u * kAttnWarps;
      const int64_t at = ((first + (j < length ? j : 0)) * kv_heads + h) * D + lane * kDims;
#pragma unroll
      for (int i = 0; i < kDims; i++) {
        kk[u][i] = load(k_cache + at + i);
        vv[u][i] = load(v_cache + at + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kAttnKeysPerStep; u++) {
      if (j0 + u * kAttnWarps >= length) break;
#pragma unroll
      for (int g = 0; g < G; g++) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kDims; i++) s += qr[g][i] * kk[u][i];
        s = warp_sum(s);
        const float mn = fmaxf(m[g], s);
        const float correction = expf(m[g] - mn);
        const float p = expf(s - mn);
        l[g] = l[g] * correction + p;
#pragma unroll
        for (int i = 0; i < kDims; i++) acc[g][i] = acc[g][i] * correction + p * vv[u][i];
        m[g] = mn;
      }
    }
  }

  // Merge the warps' partial softmaxes.
  __shared__ float part_m[kAttnWarps][G];
  __shared__ float part_l[kAttnWarps][G];
  __shared__ float part_acc[kAttnWarps][G][D];
#pragma unroll
  for (int g = 0; g < G; g++) {
    if (lane == 0) {
      part_m[warp][g] = m[g];
      part_l[warp][g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < kDims; i++) part_acc[warp][g][lane * kDims + i] = acc[g][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += kAttnWarps * 32) {
    const int g = e / D;
    const int d = e % D;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; w++) mx = fmaxf(mx, part_m[w][g]);
    float total = 0.f;
    float o = 0.f;
    for (int w = 0; w < kAttnWarps; w++) {
      const float f = part_l[w][g] > 0.f ? expf(part_m[w][g] - mx) : 0.f;
      total += part_l[w][g] * f;
      o += part_acc[w][g][d] * f;
    }
    out[((static_cast<int64_t>(b) * kv_heads + h) * G + g) * D + d] = cast<T>(o / total);
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

template <typename T, int D>
void launch_decode_attention(int64_t groups, dim3 grid, cudaStream_t stream, const void* q, const void* k_new,
                             const void* v_new, void* k_cache, void* v_cache, const int64_t* write_index, void* out,
                             int64_t k_row, int64_t v_row, int64_t slot_tokens, int kv_heads, float scale) {
#define VT_DECODE_ATTENTION(G)                                                                              \
  slot_decode_attention_kernel<T, D, G><<<grid, kAttnWarps * 32, 0, stream>>>(                              \
      static_cast<const T*>(q), static_cast<const T*>(k_new), static_cast<const T*>(v_new),                 \
      static_cast<T*>(k_cache), static_cast<T*>(v_cache), write_index, static_cast<T*>(out), k_row, v_row, \
      slot_tokens, kv_heads, scale)
  switch (groups) {
    case 1: VT_DECODE_ATTENTION(1); break;
    case 2: VT_DECODE_ATTENTION(2); break;
    case 4: VT_DECODE_ATTENTION(4); break;
    case 5: VT_DECODE_ATTENTION(5); break;
    case 6: VT_DECODE_ATTENTION(6); break;
    case 7: VT_DECODE_ATTENTION(7); break;
    case 8: VT_DECODE_ATTENTION(8); break;
    default: break;
  }
#undef VT_DECODE_ATTENTION
}

}  // namespace

bool slot_decode_attention_supported(int64_t groups, int64_t dim) {
  return dim == 128 && (groups == 1 || groups == 2 || (groups >= 4 && groups <= 8));
}

const char* slot_decode_attention(Dtype dtype, const void* q, const void* k_new, const void* v_new, void* k_cache,
                                  void* v_cache, const int64_t* write_index, void* out, int64_t batch,
                                  int64_t kv_heads, int64_t groups, int64_t dim, int64_t k_row, int64_t v_row,
                                  int64_t slot_tokens, float scale, void* stream) {
  if (!slot_decode_attention_supported(groups, dim)) return "slot_decode_attention: unsupported head layout";
  if (batch == 0) return nullptr;
  const dim3 grid(static_cast<unsigned>(batch), static_cast<unsigned>(kv_heads));
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_decode_attention<T, 128>(groups, grid, static_cast<cudaStream_t>(stream), q, k_new, v_new, k_cache, v_cache,
                                    write_index, out, k_row, v_row, slot_tokens, static_cast<int>(kv_heads), scale);
  });
}

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
