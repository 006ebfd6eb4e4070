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
// Split over keys (flash-decoding): block (row, kv head, split) takes keys
// [split * kAttnChunk, (split + 1) * kAttnChunk) of the row's slot for all G query heads
// of that kv head, so every key and value is read once. The block first copies its
// chunk of keys and values into shared memory with every load in flight at once (decode
// attention is bound by memory latency, not arithmetic), then: scores (groups of
// kAttnLanes lanes own one key each), a softmax per head over the chunk, and the
// weighted sum of values (thread d owns output dim d of every head). Each block writes an
// unnormalised partial (max, sum of exponentials, weighted values) per head; a second
// kernel merges the splits.

constexpr int kAttnWarps = 4;
constexpr int kAttnThreads = kAttnWarps * 32;
constexpr int kAttnChunk = 32;
constexpr int kAttnLanes = 8;
constexpr int kAttnGroups = 32 / kAttnLanes;  // keys a warp scores at once

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <typename T, int D, int G>
__global__ void __launch_bounds__(kAttnThreads)
    slot_decode_attention_partial(const T* __restrict__ q, const T* __restrict__ k_new, const T* __restrict__ v_new,
                                  T* __restrict__ k_cache, T* __restrict__ v_cache,
                                  const int64_t* __restrict__ write_index, float* __restrict__ part_o,
                                  float* __restrict__ part_ml, int64_t k_row, int64_t v_row, int64_t slot_tokens,
                                  int kv_heads, float scale) {
  static_assert(D == kAttnThreads, "phase 3 maps one thread to each head dim");
  static_assert(kAttnChunk == 32, "phase 2 gives each lane one key of the chunk");
  constexpr int kDims = D / kAttnLanes;  // dims of a key per lane in phase 1
  using P = Pack<T>;
  constexpr int kRowPacks = D / P::kSize;  // 16-byte packs per key row
  const int b = blockIdx.x;
  const int h = blockIdx.y;
  const int split = blockIdx.z;
  const int splits = gridDim.z;
  const int q_heads = kv_heads * G;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = lane / kAttnLanes;
  const int sub = lane % kAttnLanes;
  const int64_t flat = write_index[b];
  const int64_t pos = flat % slot_tokens;
  const int64_t first = flat - pos;  // token row of position 0 of this slot
  const int64_t begin = static_cast<int64_t>(split) * kAttnChunk;
  const int64_t end = begin + kAttnChunk < pos + 1 ? begin + kAttnChunk : pos + 1;
  const int count = end > begin ? static_cast<int>(end - begin) : 0;  // keys of this chunk
  const T* kn = k_new + b * k_row + h * D;
  const T* vn = v_new + b * v_row + h * D;

  __shared__ P k_s[kAttnChunk][kRowPacks];
  __shared__ P v_s[kAttnChunk][kRowPacks];
  __shared__ float q_s[G][D];
  __shared__ float prob[G][kAttnChunk];
  __shared__ float head_m[G];
  __shared__ float head_l[G];

  // The chunk's keys and values (the new position from k_new / v_new, so no block waits
  // for another): all loads first, into registers, then the stores, so every load of
  // the block is in flight at once. The block holding the new position stores it in the
  // cache.
  constexpr int kRounds = kAttnChunk * kRowPacks / kAttnThreads;
  P kr[kRounds], vr[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; r++) {
    const int e = threadIdx.x + r * kAttnThreads;
    const int jj = e / kRowPacks;
    const int part = e % kRowPacks;
    const int64_t j = begin + jj;
    if (jj < count) {
      const T* ksrc = j == pos ? kn : k_cache + ((first + j) * kv_heads + h) * D;
      const T* vsrc = j == pos ? vn : v_cache + ((first + j) * kv_heads + h) * D;
      kr[r] = reinterpret_cast<const P*>(ksrc)[part];
      vr[r] = reinterpret_cast<const P*>(vsrc)[part];
    }
  }
#pragma unroll
  for (int r = 0; r < kRounds; r++) {
    const int e = threadIdx.x + r * kAttnThreads;
    const int jj = e / kRowPacks;
    const int part = e % kRowPacks;
    if (jj < count) {
      k_s[jj][part] = kr[r];
      v_s[jj][part] = vr[r];
      if (begin + jj == pos) {
        reinterpret_cast<P*>(k_cache + (flat * kv_heads + h) * D)[part] = kr[r];
        reinterpret_cast<P*>(v_cache + (flat * kv_heads + h) * D)[part] = vr[r];
      }
    }
  }
  const T* qb = q + (static_cast<int64_t>(b) * q_heads + h * G) * D;
  for (int e = threadIdx.x; e < G * D; e += kAttnThreads) q_s[e / D][e % D] = load(qb + e) * scale;
  __syncthreads();

  // Phase 1: scores. Every lane takes part in the shuffles; keys past the count score -inf.
  const T* k_flat = reinterpret_cast<const T*>(k_s);
  for (int j0 = warp * kAttnGroups; j0 < kAttnChunk; j0 += kAttnWarps * kAttnGroups) {
    const int jj = j0 + group;
    const bool valid = jj < count;
    const T* kp = k_flat + (valid ? jj : 0) * D + sub * kDims;
    float kk[kDims];
#pragma unroll
    for (int i = 0; i < kDims; i++) kk[i] = load(kp + i);
#pragma unroll
    for (int g = 0; g < G; g++) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; i++) s += q_s[g][sub * kDims + i] * kk[i];
#pragma unroll
      for (int offset = kAttnLanes / 2; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (sub == 0) prob[g][jj] = valid ? s : -INFINITY;
    }
  }
  __syncthreads();

  // Phase 2: softmax numerators per head over the chunk (a warp per head, a key per lane).
  for (int g = warp; g < G; g += kAttnWarps) {
    const float a = prob[g][lane];
    const float mx = warp_max(a);
    const float p = a == -INFINITY ? 0.f : expf(a - mx);
    prob[g][lane] = p;
    const float total = warp_sum(p);
    if (lane == 0) {
      head_m[g] = mx;
      head_l[g] = total;
    }
  }
  __syncthreads();

  // Phase 3: weighted values; thread d owns dim d of every head.
  const int d = threadIdx.x;
  const T* v_flat = reinterpret_cast<const T*>(v_s);
  float o[G];
#pragma unroll
  for (int g = 0; g < G; g++) o[g] = 0.f;
  for (int jj = 0; jj < count; jj++) {
    const float vd = load(v_flat + jj * D + d);
#pragma unroll
    for (int g = 0; g < G; g++) o[g] += prob[g][jj] * vd;
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
    // (row, query head, split): D weighted values, then (max, sum).
    const int64_t at = (static_cast<int64_t>(b) * q_heads + h * G + g) * splits + split;
    part_o[at * D + d] = o[g];
    if (d == 0) {
      part_ml[at * 2] = head_m[g];
      part_ml[at * 2 + 1] = head_l[g];
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
  const dim3 grid(batch, kv_heads, splits);
#define VT_DECODE_ATTENTION(G)                                                                              \
  slot_decode_attention_partial<T, D, G><<<grid, kAttnThreads, 0, stream>>>(                                \
      static_cast<const T*>(q), static_cast<const T*>(k_new), static_cast<const T*>(v_new),                 \
      static_cast<T*>(k_cache), static_cast<T*>(v_cache), write_index, part_o, part_ml, k_row, v_row,       \
      slot_tokens, static_cast<int>(kv_heads), scale)
  switch (groups) {
    case 1: VT_DECODE_ATTENTION(1); break;
    case 2: VT_DECODE_ATTENTION(2); break;
    case 3: VT_DECODE_ATTENTION(3); break;
    case 4: VT_DECODE_ATTENTION(4); break;
    case 5: VT_DECODE_ATTENTION(5); break;
    case 6: VT_DECODE_ATTENTION(6); break;
    case 7: VT_DECODE_ATTENTION(7); break;
    case 8: VT_DECODE_ATTENTION(8); break;
    default: return;
  }
#undef VT_DECODE_ATTENTION
  slot_decode_attention_merge<T><<<dim3(batch, kv_heads * static_cast<unsigned>(groups)), D, 0, stream>>>(
      part_o, part_ml, static_cast<T*>(out), static_cast<int>(splits), D);
}

}  // namespace

bool slot_decode_attention_supported(int64_t groups, int64_t dim) { return dim == 128 && groups >= 1 && groups <= 8; }

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
