// vagen's fused CUDA kernels; see kernels.h for what each computes and why.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
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

// 16 bytes of T: the unit of vectorised loads and stores.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Vectors each thread of a norm keeps in registers between the two passes.
constexpr int kNormPacks = 4;

// One block per row of `hidden` values, held in registers between the sum of squares and
// the scaling: each thread takes packs threadIdx.x, threadIdx.x + kNormThreads, ...
// Needs hidden % Pack::kSize == 0, hidden <= kNormThreads * kNormPacks * Pack::kSize and
// 16-byte aligned rows (the launcher checks; otherwise add_rms_norm_scalar runs).
template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    add_rms_norm_packed(const T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ weight,
                        T* __restrict__ sum_out, T* __restrict__ norm_out, int hidden, float eps) {
  using P = Pack<T>;
  constexpr int kSize = P::kSize;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  const int packs = hidden / kSize;
  float vals[kNormPacks][kSize];
  float squares = 0.f;
#pragma unroll
  for (int r = 0; r < kNormPacks; r++) {
    const int pi = threadIdx.x + r * kNormThreads;
    if (pi >= packs) break;
    const P xp = reinterpret_cast<const P*>(x + base)[pi];
    P rp, sp;
    if (residual != nullptr) rp = reinterpret_cast<const P*>(residual + base)[pi];
#pragma unroll
    for (int e = 0; e < kSize; e++) {
      float v = load(&xp.v[e]);
      if (residual != nullptr) {
        v = rounded<T>(v + load(&rp.v[e]));
        sp.v[e] = cast<T>(v);
      }
      vals[r][e] = v;
      squares += v * v;
    }
    if (residual != nullptr) reinterpret_cast<P*>(sum_out + base)[pi] = sp;
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
  const float r_inv = inv_rms;
#pragma unroll
  for (int r = 0; r < kNormPacks; r++) {
    const int pi = threadIdx.x + r * kNormThreads;
    if (pi >= packs) break;
    P wp, op;
    if (weight != nullptr) wp = reinterpret_cast<const P*>(weight)[pi];
#pragma unroll
    for (int e = 0; e < kSize; e++) {
      const float y = rounded<T>(vals[r][e] * r_inv);
      op.v[e] = cast<T>(weight != nullptr ? load(&wp.v[e]) * y : y);
    }
    reinterpret_cast<P*>(norm_out + base)[pi] = op;
  }
}

// Any hidden size and alignment: one block per row, the sum re-read in the second pass.
template <typename T>
__global__ void add_rms_norm_scalar(const T* __restrict__ x, const T* __restrict__ residual,
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

// One block per token; each thread rotates pairs (d, d + dim / 2) of one head, so every
// input is read once and no 64-bit division runs per element.
template <typename T>
__global__ void rotary_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ cos,
                              const T* __restrict__ sin, T* __restrict__ q_out, T* __restrict__ k_out, int q_heads,
                              int k_heads, int dim, int64_t q_row, int64_t k_row) {
  const int64_t token = blockIdx.x;
  const int half = dim / 2;
  const T* c = cos + token * dim;
  const T* s = sin + token * dim;
  for (int pair = threadIdx.x; pair < (q_heads + k_heads) * half; pair += blockDim.x) {
    const int head = pair / half;
    const int d = pair - head * half;
    const bool is_q = head < q_heads;
    const int h = is_q ? head : head - q_heads;
    const T* src = (is_q ? q + token * q_row : k + token * k_row) + h * dim;
    T* dst = (is_q ? q_out + token * q_heads * dim : k_out + token * k_heads * dim) + h * dim;
    const float x1 = load(src + d);
    const float x2 = load(src + d + half);
    // out = x * cos + rotate_half(x) * sin, rotate_half(x1, x2) = (-x2, x1)
    dst[d] = cast<T>(rounded<T>(x1 * load(c + d)) + rounded<T>(-x2 * load(s + d)));
    dst[d + half] = cast<T>(rounded<T>(x2 * load(c + d + half)) + rounded<T>(x1 * load(s + d + half)));
  }
}

// Grid (column blocks, row blocks); rows beyond gridDim.y loop. PACKED: 16-byte packs
// (cols % Pack::kSize == 0 and aligned rows, checked by the launcher); otherwise one
// element per thread.
template <typename T, bool PACKED>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out, int64_t rows,
                                int cols, int64_t in_row) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    if constexpr (PACKED) {
      using P = Pack<T>;
      if (i >= cols / P::kSize) return;
      const P gp = reinterpret_cast<const P*>(gate + row * in_row)[i];
      const P up_p = reinterpret_cast<const P*>(up + row * in_row)[i];
      P op;
#pragma unroll
      for (int e = 0; e < P::kSize; e++) {
        const float g = load(&gp.v[e]);
        op.v[e] = cast<T>(rounded<T>(g / (1.f + expf(-g))) * load(&up_p.v[e]));
      }
      reinterpret_cast<P*>(out + row * cols)[i] = op;
    } else {
      if (i >= cols) return;
      const float g = load(gate + row * in_row + i);
      out[row * cols + i] = cast<T>(rounded<T>(g / (1.f + expf(-g))) * load(up + row * in_row + i));
    }
  }
}

// ---- decode attention over the slot KV cache ---------------------------------------
//
// Split over keys (flash-decoding): block (row, pair of query heads, split) takes keys
// [split * kAttnChunk, (split + 1) * kAttnChunk) of the row's slot and writes an
// unnormalised partial (running max, sum of exponentials, weighted values) per query
// head; a second kernel merges the splits. Inside a block, groups of kAttnLanes lanes
// each own one key at a time (every lane holds D / kAttnLanes dims of it), so a warp
// works on 32 / kAttnLanes keys at once and a dot product needs three shuffles. Each
// group keeps its own online softmax; groups, then warps, merge at the end.

constexpr int kAttnWarps = 4;
constexpr int kAttnChunk = 64;
constexpr int kAttnLanes = 8;
constexpr int kAttnGroups = 32 / kAttnLanes;  // keys a warp works on at once

template <typename T, int D, int HB>
__global__ void __launch_bounds__(kAttnWarps * 32)
    slot_decode_attention_partial(const T* __restrict__ q, const T* __restrict__ k_new, const T* __restrict__ v_new,
                                  T* __restrict__ k_cache, T* __restrict__ v_cache,
                                  const int64_t* __restrict__ write_index, float* __restrict__ part_o,
                                  float* __restrict__ part_ml, int64_t k_row, int64_t v_row, int64_t slot_tokens,
                                  int kv_heads, int groups, float scale) {
  constexpr int kDims = D / kAttnLanes;  // dims per lane
  using P = Pack<T>;
  constexpr int kPacks = kDims / P::kSize;
  static_assert(kDims % P::kSize == 0, "a lane's dims must be whole 16-byte packs");
  const int b = blockIdx.x;
  const int hq0 = blockIdx.y * HB;  // first query head of this block
  const int h = hq0 / groups;       // their kv head
  const int q_heads = kv_heads * groups;
  const int split = blockIdx.z;
  const int splits = gridDim.z;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = lane / kAttnLanes;
  const int sub = lane % kAttnLanes;
  const int64_t flat = write_index[b];
  const int64_t pos = flat % slot_tokens;
  const int64_t first = flat - pos;  // token row of position 0 of this slot
  const int64_t begin = static_cast<int64_t>(split) * kAttnChunk;
  const int64_t end = begin + kAttnChunk < pos + 1 ? begin + kAttnChunk : pos + 1;
  const T* kn = k_new + b * k_row + h * D;
  const T* vn = v_new + b * v_row + h * D;

  // One block per (row, kv head) stores the new key and value: the one whose chunk holds
  // the new position, among the blocks of the kv head's first query heads. Every block
  // reads that position from k_new / v_new, so no block waits for another.
  if (hq0 % groups == 0 && begin <= pos && pos < begin + kAttnChunk && warp == 0) {
    for (int i = lane; i < D; i += 32) {
      k_cache[(flat * kv_heads + h) * D + i] = kn[i];
      v_cache[(flat * kv_heads + h) * D + i] = vn[i];
    }
  }

  float qr[HB][kDims];
#pragma unroll
  for (int hh = 0; hh < HB; hh++) {
    const T* qp = q + (static_cast<int64_t>(b) * q_heads + hq0 + hh) * D + sub * kDims;
#pragma unroll
    for (int i = 0; i < kDims; i++) qr[hh][i] = load(qp + i) * scale;
  }

  float m[HB], l[HB], acc[HB][kDims];
#pragma unroll
  for (int hh = 0; hh < HB; hh++) {
    m[hh] = -INFINITY;
    l[hh] = 0.f;
#pragma unroll
    for (int i = 0; i < kDims; i++) acc[hh][i] = 0.f;
  }

  // The loop bound is the same for the whole warp (shuffles need every lane); a group
  // whose key falls past the end loads a valid row and ignores it.
  for (int64_t j0 = begin + warp * kAttnGroups; j0 < end; j0 += kAttnWarps * kAttnGroups) {
    const int64_t j = j0 + group;
    const bool valid = j < end;
    const bool fresh = j == pos;
    const T* kp = fresh ? kn : k_cache + ((first + (valid ? j : begin)) * kv_heads + h) * D;
    const T* vp = fresh ? vn : v_cache + ((first + (valid ? j : begin)) * kv_heads + h) * D;
    float kk[kDims], vv[kDims];
#pragma unroll
    for (int pk = 0; pk < kPacks; pk++) {
      const P kpk = reinterpret_cast<const P*>(kp + sub * kDims)[pk];
      const P vpk = reinterpret_cast<const P*>(vp + sub * kDims)[pk];
#pragma unroll
      for (int e = 0; e < P::kSize; e++) {
        kk[pk * P::kSize + e] = load(&kpk.v[e]);
        vv[pk * P::kSize + e] = load(&vpk.v[e]);
      }
    }
#pragma unroll
    for (int hh = 0; hh < HB; hh++) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; i++) s += qr[hh][i] * kk[i];
#pragma unroll
      for (int offset = kAttnLanes / 2; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (valid) {
        const float mn = fmaxf(m[hh], s);
        const float correction = expf(m[hh] - mn);
        const float p = expf(s - mn);
        l[hh] = l[hh] * correction + p;
#pragma unroll
        for (int i = 0; i < kDims; i++) acc[hh][i] = acc[hh][i] * correction + p * vv[i];
        m[hh] = mn;
      }
    }
  }

  // Merge the groups of each warp (lanes with the same `sub` hold the same dims).
#pragma unroll
  for (int hh = 0; hh < HB; hh++) {
    float mx = m[hh];
#pragma unroll
    for (int offset = kAttnLanes; offset < 32; offset <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
    const float f = l[hh] > 0.f ? expf(m[hh] - mx) : 0.f;
    float sum = l[hh] * f;
#pragma unroll
    for (int offset = kAttnLanes; offset < 32; offset <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
#pragma unroll
    for (int i = 0; i < kDims; i++) {
      float a = acc[hh][i] * f;
#pragma unroll
      for (int offset = kAttnLanes; offset < 32; offset <<= 1) a += __shfl_xor_sync(0xffffffffu, a, offset);
      acc[hh][i] = a;
    }
    m[hh] = mx;
    l[hh] = sum;
  }

  // Then the warps, and store this split's partial for each of the block's query heads.
  __shared__ float warp_m[kAttnWarps][HB];
  __shared__ float warp_l[kAttnWarps][HB];
  __shared__ float warp_acc[kAttnWarps][HB][D];
  if (group == 0) {
#pragma unroll
    for (int hh = 0; hh < HB; hh++) {
      if (sub == 0) {
        warp_m[warp][hh] = m[hh];
        warp_l[warp][hh] = l[hh];
      }
#pragma unroll
      for (int i = 0; i < kDims; i++) warp_acc[warp][hh][sub * kDims + i] = acc[hh][i];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < HB * D; e += kAttnWarps * 32) {
    const int hh = e / D;
    const int d = e % D;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; w++)
      if (warp_l[w][hh] > 0.f) mx = fmaxf(mx, warp_m[w][hh]);
    float total = 0.f;
    float o = 0.f;
    for (int w = 0; w < kAttnWarps; w++) {
      const float f = warp_l[w][hh] > 0.f ? expf(warp_m[w][hh] - mx) : 0.f;
      total += warp_l[w][hh] * f;
      o += warp_acc[w][hh][d] * f;
    }
    // (row, query head, split): D weighted values, then (max, sum).
    const int64_t at = (static_cast<int64_t>(b) * q_heads + hq0 + hh) * splits + split;
    part_o[at * D + d] = o;
    if (d == 0) {
      part_ml[at * 2] = mx;
      part_ml[at * 2 + 1] = total;
    }
  }
}

// Block (row, query head), one thread per dim: merges the splits' partials.
template <typename T>
__global__ void slot_decode_attention_merge(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                            T* __restrict__ out, int splits, int dim) {
  const int64_t head = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;  // b * q_heads + query head
  const float* ml = part_ml + head * splits * 2;
  float mx = -INFINITY;
  for (int s = 0; s < splits; s++)
    if (ml[2 * s + 1] > 0.f) mx = fmaxf(mx, ml[2 * s]);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float total = 0.f;
    float o = 0.f;
    for (int s = 0; s < splits; s++) {
      if (!(ml[2 * s + 1] > 0.f)) continue;
      const float f = expf(ml[2 * s] - mx);
      total += ml[2 * s + 1] * f;
      o += part_o[(head * splits + s) * dim + d] * f;
    }
    out[head * dim + d] = cast<T>(o / total);
  }
}

const char* launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
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
void launch_decode_attention(int64_t groups, unsigned batch, unsigned kv_heads, unsigned splits, cudaStream_t stream,
                             const void* q, const void* k_new, const void* v_new, void* k_cache, void* v_cache,
                             const int64_t* write_index, float* part_o, float* part_ml, void* out, int64_t k_row,
                             int64_t v_row, int64_t slot_tokens, float scale) {
  const unsigned q_heads = kv_heads * static_cast<unsigned>(groups);
  // Two query heads per block where the group size allows: the pair shares its key loads.
  if (groups % 2 == 0) {
    slot_decode_attention_partial<T, D, 2><<<dim3(batch, q_heads / 2, splits), kAttnWarps * 32, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k_new), static_cast<const T*>(v_new), static_cast<T*>(k_cache),
        static_cast<T*>(v_cache), write_index, part_o, part_ml, k_row, v_row, slot_tokens, static_cast<int>(kv_heads),
        static_cast<int>(groups), scale);
  } else {
    slot_decode_attention_partial<T, D, 1><<<dim3(batch, q_heads, splits), kAttnWarps * 32, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k_new), static_cast<const T*>(v_new), static_cast<T*>(k_cache),
        static_cast<T*>(v_cache), write_index, part_o, part_ml, k_row, v_row, slot_tokens, static_cast<int>(kv_heads),
        static_cast<int>(groups), scale);
  }
  slot_decode_attention_merge<T><<<dim3(batch, q_heads), D, 0, stream>>>(part_o, part_ml, static_cast<T*>(out),
                                                                         static_cast<int>(splits), D);
}

}  // namespace

bool slot_decode_attention_supported(int64_t groups, int64_t dim) { return dim == 128 && groups >= 1 && groups <= 64; }

int64_t slot_decode_attention_splits(int64_t max_length) {
  return max_length <= kAttnChunk ? 1 : (max_length + kAttnChunk - 1) / kAttnChunk;
}

const char* slot_decode_attention(Dtype dtype, const void* q, const void* k_new, const void* v_new, void* k_cache,
                                  void* v_cache, const int64_t* write_index, float* part_o, float* part_ml,
                                  void* out, int64_t batch, int64_t kv_heads, int64_t groups, int64_t dim,
                                  int64_t k_row, int64_t v_row, int64_t slot_tokens, int64_t max_length, float scale,
                                  void* stream) {
  if (!slot_decode_attention_supported(groups, dim)) return "slot_decode_attention: unsupported head layout";
  if (batch == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_decode_attention<T, 128>(groups, static_cast<unsigned>(batch), static_cast<unsigned>(kv_heads),
                                    static_cast<unsigned>(slot_decode_attention_splits(max_length)),
                                    static_cast<cudaStream_t>(stream), q, k_new, v_new, k_cache, v_cache, write_index,
                                    part_o, part_ml, out, k_row, v_row, slot_tokens, scale);
  });
}

const char* add_rms_norm(Dtype dtype, const void* x, const void* residual, const void* weight, void* sum_out,
                         void* norm_out, int64_t rows, int64_t hidden, float eps, void* stream) {
  if (rows == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto s = static_cast<cudaStream_t>(stream);
    const int64_t pack = Pack<T>::kSize;
    const bool packed = hidden % pack == 0 && hidden <= kNormThreads * kNormPacks * pack && aligned16(x) &&
                        aligned16(residual) && aligned16(weight) && aligned16(sum_out) && aligned16(norm_out);
    if (packed) {
      add_rms_norm_packed<T><<<static_cast<unsigned>(rows), kNormThreads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(residual), static_cast<const T*>(weight),
          static_cast<T*>(sum_out), static_cast<T*>(norm_out), static_cast<int>(hidden), eps);
    } else {
      add_rms_norm_scalar<T><<<static_cast<unsigned>(rows), kNormThreads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(residual), static_cast<const T*>(weight),
          static_cast<T*>(sum_out), static_cast<T*>(norm_out), hidden, eps);
    }
  });
}

const char* rotary(Dtype dtype, const void* q, const void* k, const void* cos, const void* sin, void* q_out,
                   void* k_out, int64_t tokens, int64_t q_heads, int64_t k_heads, int64_t dim, int64_t q_row,
                   int64_t k_row, void* stream) {
  if (tokens == 0 || dim == 0) return nullptr;
  const int64_t pairs = (q_heads + k_heads) * (dim / 2);
  const int threads = pairs >= 256 ? 256 : static_cast<int>((pairs + 31) / 32 * 32);
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    rotary_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(cos), static_cast<const T*>(sin),
        static_cast<T*>(q_out), static_cast<T*>(k_out), static_cast<int>(q_heads), static_cast<int>(k_heads),
        static_cast<int>(dim), q_row, k_row);
  });
}

const char* silu_mul(Dtype dtype, const void* gate, const void* up, void* out, int64_t rows, int64_t cols,
                     int64_t in_row, void* stream) {
  if (rows == 0 || cols == 0) return nullptr;
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto s = static_cast<cudaStream_t>(stream);
    const int64_t pack = Pack<T>::kSize;
    const bool packed = cols % pack == 0 && in_row % pack == 0 && aligned16(gate) && aligned16(up) && aligned16(out);
    const int64_t units = packed ? cols / pack : cols;
    const dim3 grid(static_cast<unsigned>((units + 255) / 256), static_cast<unsigned>(rows < 65535 ? rows : 65535));
    if (packed) {
      silu_mul_kernel<T, true><<<grid, 256, 0, s>>>(static_cast<const T*>(gate), static_cast<const T*>(up),
                                                     static_cast<T*>(out), rows, static_cast<int>(cols), in_row);
    } else {
      silu_mul_kernel<T, false><<<grid, 256, 0, s>>>(static_cast<const T*>(gate), static_cast<const T*>(up),
                                                      static_cast<T*>(out), rows, static_cast<int>(cols), in_row);
    }
  });
}

}  // namespace vt::kernels
