// vagen's fused CUDA kernels; see kernels.h for what each computes and why.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <mma.h>
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

// 1 / sqrt(mean square + eps) of a row whose sum of squares is spread over the
// kNormThreads threads of the block; every thread gets it.
__device__ __forceinline__ float block_inv_rms(float squares, int64_t hidden, float eps) {
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
  return inv_rms;
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
  // The weight is loaded with the inputs, so its round trip overlaps theirs rather than
  // following the reduction.
  P wp[kNormPacks];
  float squares = 0.f;
#pragma unroll
  for (int r = 0; r < kNormPacks; r++) {
    const int pi = threadIdx.x + r * kNormThreads;
    if (pi >= packs) break;
    if (weight != nullptr) wp[r] = reinterpret_cast<const P*>(weight)[pi];
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
  const float r_inv = block_inv_rms(squares, hidden, eps);
#pragma unroll
  for (int r = 0; r < kNormPacks; r++) {
    const int pi = threadIdx.x + r * kNormThreads;
    if (pi >= packs) break;
    P op;
#pragma unroll
    for (int e = 0; e < kSize; e++) {
      const float y = rounded<T>(vals[r][e] * r_inv);
      op.v[e] = cast<T>(weight != nullptr ? load(&wp[r].v[e]) * y : y);
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
  const float r = block_inv_rms(squares, hidden, eps);
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
// Split over keys (flash-decoding). Block (row, kv head and chunk of its query heads,
// split) takes keys [split * kAttnChunk, (split + 1) * kAttnChunk) of the row's slot, up
// to the row's new position. It stages them in shared memory with asynchronous copies
// issued all at once, so a block waits for one memory round trip rather than one per
// key, then works from shared memory in three phases: the scores of up to kAttnHeads
// query heads (a whole group for Qwen-style GQA, so each key is read from memory once),
// their softmax, and the weighted values. It writes an unnormalised partial (max, sum of
// exponentials, weighted values) per query head; a second kernel merges the splits.
//
// In 16-bit types both products run on tensor cores (WMMA 8 x 32 x 16 tiles: the eight
// query heads are the tile's rows), with probabilities rounded to the input type for the
// second product as flash attention does; float32 runs them on CUDA cores.

constexpr int kAttnThreads = 128;
constexpr int kAttnChunk = 64;  // keys per block
constexpr int kAttnHeads = 8;   // query heads per block
static_assert(kAttnThreads % kAttnChunk == 0, "score phase: whole head sets per key");

// Dynamic shared memory of one block, in 32-byte aligned sections (WMMA's requirement):
// keys (rows padded by one pack, so column-wise reads hit distinct banks), values, the
// queries (float32 and scaled on CUDA cores; as T with padded rows on tensor cores, where
// the section later receives the float32 output), scores, probabilities as T (tensor
// cores), and each head's (max, sum).
template <typename T, int D>
struct AttnSmem {
  static constexpr bool kTensorCores = !std::is_same_v<T, float>;
  static constexpr int kKeyPitch = D + Pack<T>::kSize;
  static constexpr int kQueryPitch = D + Pack<T>::kSize;  // tensor cores: T rows
  static constexpr int kScorePitch = kAttnChunk + 4;
  static constexpr int kProbPitch = kAttnChunk + 8;
  static constexpr size_t kKeys = sizeof(T) * kAttnChunk * kKeyPitch;
  static constexpr size_t kValues = sizeof(T) * kAttnChunk * D;
  static constexpr size_t kQueries = sizeof(float) * kAttnHeads * D;
  static constexpr size_t kScores = sizeof(float) * kAttnHeads * kScorePitch;
  static constexpr size_t kProbs = kTensorCores ? sizeof(T) * kAttnHeads * kProbPitch : 0;
  static constexpr size_t kBytes = kKeys + kValues + kQueries + kScores + kProbs + sizeof(float) * 2 * kAttnHeads;
  static_assert(kKeys % 32 == 0 && kValues % 32 == 0 && kQueries % 32 == 0 && kScores % 32 == 0 && kProbs % 32 == 0,
                "32-byte aligned sections");
  static_assert(!kTensorCores || sizeof(T) * kAttnHeads * kQueryPitch <= kQueries, "T queries fit the float32 section");
};

// x rotated by one rotary angle: x * c + partner * s, where partner is -x[d + dim / 2] in
// the first half of a head and x[d - dim / 2] in the second. Rounds like rotary_kernel,
// so a fused rotary gives the same values as the separate kernel.
template <typename T>
__device__ __forceinline__ T rotated(float x, float partner, float c, float s, bool first_half) {
  return cast<T>(rounded<T>(x * c) + rounded<T>((first_half ? -partner : partner) * s));
}

// ROPE: q and the new key arrive unrotated and cos / sin (one dim-long row per batch row)
// rotate them here, which saves the decoder a rotary kernel per layer.
template <typename T, int D, bool ROPE>
__global__ void __launch_bounds__(kAttnThreads)
    slot_decode_attention_partial(const T* __restrict__ q, const T* __restrict__ k_new, const T* __restrict__ v_new,
                                  const T* __restrict__ cos, const T* __restrict__ sin, T* __restrict__ k_cache,
                                  T* __restrict__ v_cache, const int64_t* __restrict__ write_index,
                                  float* __restrict__ part_o, float* __restrict__ part_ml, int64_t q_row,
                                  int64_t k_row, int64_t v_row, int64_t slot_tokens, int kv_heads, int groups,
                                  float scale) {
  using P = Pack<T>;
  using S = AttnSmem<T, D>;
  constexpr int kRowPacks = D / P::kSize;
  static_assert(D % P::kSize == 0 && kAttnThreads % kRowPacks == 0, "whole packs per row");
  constexpr bool kTensorCores = S::kTensorCores;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sk = reinterpret_cast<T*>(smem);
  T* sv = reinterpret_cast<T*>(smem + S::kKeys);
  float* sq = reinterpret_cast<float*>(smem + S::kKeys + S::kValues);  // CUDA cores; later the output
  T* sqt = reinterpret_cast<T*>(sq);                                    // tensor cores
  float* ss = reinterpret_cast<float*>(smem + S::kKeys + S::kValues + S::kQueries);
  T* sp = reinterpret_cast<T*>(smem + S::kKeys + S::kValues + S::kQueries + S::kScores);
  float* sml = reinterpret_cast<float*>(smem + S::kKeys + S::kValues + S::kQueries + S::kScores + S::kProbs);

  const int tid = threadIdx.x;
  const int b = blockIdx.x;
  const int chunks = (groups + kAttnHeads - 1) / kAttnHeads;  // head chunks per kv head
  const int h = blockIdx.y / chunks;
  const int chunk = blockIdx.y % chunks;
  const int heads = min(kAttnHeads, groups - chunk * kAttnHeads);
  const int q_heads = kv_heads * groups;
  const int head_in_row = h * groups + chunk * kAttnHeads;  // the block's first query head
  const int64_t head0 = static_cast<int64_t>(b) * q_heads + head_in_row;
  const int split = blockIdx.z;
  const int splits = gridDim.z;

  // Latency first: the queries' loads are issued before anything waits, each thread
  // holding whole packs (the block's query heads are dense and 16-byte aligned), with
  // their rotary partners and angles when rotating here.
  constexpr int kQueryPacks = (kAttnHeads * kRowPacks + kAttnThreads - 1) / kAttnThreads;
  constexpr int kHalfPacks = kRowPacks / 2;
  const P* qrow = reinterpret_cast<const P*>(q + b * q_row + head_in_row * D);
  P qp[kQueryPacks], partner[kQueryPacks], cosp[kQueryPacks], sinp[kQueryPacks];
#pragma unroll
  for (int r = 0; r < kQueryPacks; r++) {
    const int i = tid + r * kAttnThreads;
    if (i < heads * kRowPacks) {
      qp[r] = qrow[i];
      if constexpr (ROPE) {
        partner[r] = qrow[i ^ kHalfPacks];
        cosp[r] = reinterpret_cast<const P*>(cos + b * D)[i % kRowPacks];
        sinp[r] = reinterpret_cast<const P*>(sin + b * D)[i % kRowPacks];
      }
    }
  }

  const int64_t flat = write_index[b];
  // 32-bit division where it fits: the 64-bit one is a long software routine on the
  // path every thread waits on.
  const int64_t pos = flat <= UINT32_MAX && slot_tokens <= UINT32_MAX
                          ? static_cast<uint32_t>(flat) % static_cast<uint32_t>(slot_tokens)
                          : flat % slot_tokens;
  const int64_t first = flat - pos;  // token row of position 0 of this slot
  const int64_t begin = static_cast<int64_t>(split) * kAttnChunk;
  const int64_t n64 = pos + 1 - begin;
  const int n = n64 < kAttnChunk ? static_cast<int>(n64) : kAttnChunk;  // keys of this block

  if (n <= 0) {  // past the row's position: an empty partial, which the merge skips
    if (tid < heads) {
      part_ml[((head0 + tid) * splits + split) * 2] = -INFINITY;
      part_ml[((head0 + tid) * splits + split) * 2 + 1] = 0.f;
    }
    return;
  }

  // Cached keys and values: every 16-byte copy issued before any is awaited.
  const bool holds_new = pos < begin + kAttnChunk;
  const int cached = holds_new ? n - 1 : n;
  for (int i = tid; i < cached * kRowPacks; i += kAttnThreads) {
    const int j = i / kRowPacks;
    const int p = i % kRowPacks;
    const int64_t at = ((first + begin + j) * kv_heads + h) * D + p * P::kSize;
    __pipeline_memcpy_async(sk + j * S::kKeyPitch + p * P::kSize, k_cache + at, 16);
    __pipeline_memcpy_async(sv + j * D + p * P::kSize, v_cache + at, 16);
  }
  __pipeline_commit();

  // Meanwhile the new key and value, read from the projections (any alignment); the
  // block of the kv head's first head chunk also stores them in the cache. No block reads
  // that cache row in this step: the others holding it take it from k_new / v_new too.
  if (holds_new) {
    const T* kn = k_new + b * k_row + h * D;
    const T* vn = v_new + b * v_row + h * D;
    for (int d = tid; d < D; d += kAttnThreads) {
      T kd = kn[d];
      const T vd = vn[d];
      if constexpr (ROPE) {
        const int half = D / 2;
        kd = rotated<T>(load(&kd), load(kn + (d < half ? d + half : d - half)), load(cos + b * D + d),
                        load(sin + b * D + d), d < half);
      }
      sk[(n - 1) * S::kKeyPitch + d] = kd;
      sv[(n - 1) * D + d] = vd;
      if (chunk == 0) {
        k_cache[(flat * kv_heads + h) * D + d] = kd;
        v_cache[(flat * kv_heads + h) * D + d] = vd;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kQueryPacks; r++) {
    const int i = tid + r * kAttnThreads;
    if (i >= kAttnHeads * kRowPacks) continue;
    P x;
#pragma unroll
    for (int e = 0; e < P::kSize; e++) x.v[e] = cast<T>(0.f);  // tensor cores: unused heads are zero rows
    if (i < heads * kRowPacks) {
      x = qp[r];
      if constexpr (ROPE) {
#pragma unroll
        for (int e = 0; e < P::kSize; e++)
          x.v[e] = rotated<T>(load(&x.v[e]), load(&partner[r].v[e]), load(&cosp[r].v[e]), load(&sinp[r].v[e]),
                              i % kRowPacks < kHalfPacks);
      }
    } else if constexpr (!kTensorCores) {
      continue;
    }
    if constexpr (kTensorCores) {
      *reinterpret_cast<P*>(sqt + (i / kRowPacks) * S::kQueryPitch + (i % kRowPacks) * P::kSize) = x;
    } else {
#pragma unroll
      for (int e = 0; e < P::kSize; e++) sq[i * P::kSize + e] = load(&x.v[e]) * scale;
    }
  }
  // Tensor cores read whole 16-key steps: values past the last key must be zeros, not
  // whatever the shared memory held (0 * NaN would reach the output).
  const int n16 = (n + 15) / 16 * 16;
  if constexpr (kTensorCores) {
    for (int i = n * D + tid; i < n16 * D; i += kAttnThreads) sv[i] = cast<T>(0.f);
  }
  __pipeline_wait_prior(0);
  __syncthreads();

  const int warp = tid / 32;
  const int lane = tid % 32;
  if constexpr (kTensorCores) {
    // Scores (8 heads x 64 keys) = Q K^T: warps 0 and 1 take 32 keys each. Columns past
    // the last key hold garbage and are never read.
    using namespace nvcuda;
    if (warp < kAttnChunk / 32) {
      wmma::fragment<wmma::accumulator, 8, 32, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int k0 = 0; k0 < D; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 8, 32, 16, T, wmma::row_major> qa;
        wmma::fragment<wmma::matrix_b, 8, 32, 16, T, wmma::col_major> kb;
        wmma::load_matrix_sync(qa, sqt + k0, S::kQueryPitch);
        wmma::load_matrix_sync(kb, sk + warp * 32 * S::kKeyPitch + k0, S::kKeyPitch);
        wmma::mma_sync(acc, qa, kb, acc);
      }
      wmma::store_matrix_sync(ss + warp * 32, acc, S::kScorePitch, wmma::mem_row_major);
    }
  } else {
    // Scores: thread (key tid % kAttnChunk, head set tid / kAttnChunk). A warp shares its
    // head set, so query reads are broadcasts and `hh < heads` never diverges.
    constexpr int kScoreSets = kAttnThreads / kAttnChunk;
    constexpr int kScoreHeads = (kAttnHeads + kScoreSets - 1) / kScoreSets;
    const int j = tid % kAttnChunk;
    const int set = tid / kAttnChunk;
    if (j < n) {
      float s[kScoreHeads];
#pragma unroll
      for (int r = 0; r < kScoreHeads; r++) s[r] = 0.f;
      const P* kr = reinterpret_cast<const P*>(sk + j * S::kKeyPitch);
#pragma unroll 4
      for (int p = 0; p < kRowPacks; p++) {
        const P kp = kr[p];
        float kf[P::kSize];
#pragma unroll
        for (int e = 0; e < P::kSize; e++) kf[e] = load(&kp.v[e]);
#pragma unroll
        for (int r = 0; r < kScoreHeads; r++) {
          const int hh = set + r * kScoreSets;
          if (hh < heads) {
            const float4* q4 = reinterpret_cast<const float4*>(sq + hh * D + p * P::kSize);
#pragma unroll
            for (int e4 = 0; e4 < P::kSize / 4; e4++) {
              const float4 qv = q4[e4];
              s[r] += qv.x * kf[4 * e4] + qv.y * kf[4 * e4 + 1] + qv.z * kf[4 * e4 + 2] + qv.w * kf[4 * e4 + 3];
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kScoreHeads; r++) {
        const int hh = set + r * kScoreSets;
        if (hh < heads) ss[hh * S::kScorePitch + j] = s[r];
      }
    }
  }
  __syncthreads();

  // Softmax per head, one warp per head. CUDA cores: probabilities replace the scores
  // (the scale is already in q). Tensor cores: scaled here, probabilities go to sp as T,
  // zero past the last key and for unused heads.
  for (int hh = warp; hh < (kTensorCores ? kAttnHeads : heads); hh += kAttnThreads / 32) {
    float* row = ss + hh * S::kScorePitch;
    if (hh >= heads) {
      for (int j = lane; j < kAttnChunk; j += 32) sp[hh * S::kProbPitch + j] = cast<T>(0.f);
      continue;
    }
    const float f = kTensorCores ? scale : 1.f;
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, row[j] * f);
    for (int offset = 16; offset > 0; offset >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
    float sum = 0.f;
    for (int j = lane; j < kAttnChunk; j += 32) {
      const float p = j < n ? expf(row[j] * f - mx) : 0.f;
      if constexpr (kTensorCores) {
        sp[hh * S::kProbPitch + j] = cast<T>(p);
      } else if (j < n) {
        row[j] = p;
      }
      sum += p;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      sml[2 * hh] = mx;
      sml[2 * hh + 1] = sum;
    }
  }
  __syncthreads();

  if constexpr (kTensorCores) {
    // Output (8 heads x D) = P V: warp w takes dims [32 w, 32 w + 32), over the 16-key
    // steps that hold keys; float32 results land in the queries' section.
    using namespace nvcuda;
    if (warp < D / 32) {
      wmma::fragment<wmma::accumulator, 8, 32, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int k0 = 0; k0 < n16; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 8, 32, 16, T, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 8, 32, 16, T, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, sp + k0, S::kProbPitch);
        wmma::load_matrix_sync(vb, sv + k0 * D + warp * 32, D);
        wmma::mma_sync(acc, pa, vb, acc);
      }
      wmma::store_matrix_sync(sq + warp * 32, acc, D, wmma::mem_row_major);
    }
    __syncthreads();
    // (row, query head, split): D weighted values, then (max, sum).
    for (int i = tid; i < heads * (D / 4); i += kAttnThreads) {
      const int hh = i / (D / 4);
      const int d4 = i % (D / 4);
      const int64_t at = (head0 + hh) * splits + split;
      reinterpret_cast<float4*>(part_o + at * D)[d4] = reinterpret_cast<const float4*>(sq + hh * D)[d4];
      if (d4 == 0) {
        part_ml[at * 2] = sml[2 * hh];
        part_ml[at * 2 + 1] = sml[2 * hh + 1];
      }
    }
    return;
  }

  // Weighted values: thread (pack of dims tid % kRowPacks, head set tid / kRowPacks).
  constexpr int kValueSets = kAttnThreads / kRowPacks;
  constexpr int kValueHeads = (kAttnHeads + kValueSets - 1) / kValueSets;
  const int p = tid % kRowPacks;
  const int set = tid / kRowPacks;
  float acc[kValueHeads][P::kSize];
#pragma unroll
  for (int r = 0; r < kValueHeads; r++)
#pragma unroll
    for (int e = 0; e < P::kSize; e++) acc[r][e] = 0.f;
#pragma unroll 4
  for (int j = 0; j < n; j++) {
    const P vp = reinterpret_cast<const P*>(sv + j * D)[p];
    float vf[P::kSize];
#pragma unroll
    for (int e = 0; e < P::kSize; e++) vf[e] = load(&vp.v[e]);
#pragma unroll
    for (int r = 0; r < kValueHeads; r++) {
      const int hh = set + r * kValueSets;
      if (hh < heads) {
        const float w = ss[hh * S::kScorePitch + j];
#pragma unroll
        for (int e = 0; e < P::kSize; e++) acc[r][e] += w * vf[e];
      }
    }
  }
  // (row, query head, split): D weighted values, then (max, sum).
#pragma unroll
  for (int r = 0; r < kValueHeads; r++) {
    const int hh = set + r * kValueSets;
    if (hh >= heads) continue;
    const int64_t at = (head0 + hh) * splits + split;
    float4* o4 = reinterpret_cast<float4*>(part_o + at * D + p * P::kSize);
#pragma unroll
    for (int e4 = 0; e4 < P::kSize / 4; e4++)
      o4[e4] = make_float4(acc[r][4 * e4], acc[r][4 * e4 + 1], acc[r][4 * e4 + 2], acc[r][4 * e4 + 3]);
    if (p == 0) {
      part_ml[at * 2] = sml[2 * hh];
      part_ml[at * 2 + 1] = sml[2 * hh + 1];
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

// ---- greedy pick: argmax and its log-probability -----------------------------------

constexpr int kPickThreads = 1024;

// A running (max, sum of exp(x - max), first index of the max) over part of a row.
struct PickState {
  float m;
  float s;
  int64_t i;
};

__device__ __forceinline__ void pick_add(PickState& a, float v, int64_t i) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.f;
    a.m = v;
    a.i = i;
  } else if (v > -INFINITY) {
    a.s += expf(v - a.m);
  }
}

__device__ __forceinline__ PickState pick_merge(PickState a, PickState b) {
  const float m = fmaxf(a.m, b.m);
  PickState r;
  r.m = m;
  r.s = m == -INFINITY ? 0.f : a.s * expf(a.m - m) + b.s * expf(b.m - m);
  r.i = a.m > b.m ? a.i : b.m > a.m ? b.i : min(a.i, b.i);
  return r;
}

__device__ __forceinline__ PickState pick_warp_merge(PickState st) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    PickState o;
    o.m = __shfl_xor_sync(0xffffffffu, st.m, offset);
    o.s = __shfl_xor_sync(0xffffffffu, st.s, offset);
    o.i = __shfl_xor_sync(0xffffffffu, st.i, offset);
    st = pick_merge(st, o);
  }
  return st;
}

__device__ __forceinline__ void pick_store(const PickState& st, int64_t row, int64_t* index, float* logprob) {
  // A row of -inf only: argmax says 0, and its log-probability is undefined.
  index[row] = st.i == INT64_MAX ? 0 : st.i;
  logprob[row] = st.m == -INFINITY ? NAN : -logf(st.s);
}

// Block (row, part) reads columns [part * span, (part + 1) * span) of the row once:
// the first index of their maximum (argmax's rule) and the sum of exp(x - max). With one
// part it stores the row's result: log softmax at the argmax is -log(that sum); with
// several, argmax_logprob_merge combines the parts (a row alone would keep a few SMs
// busy while the rest wait). PACKED: 16-byte packs (cols, row_stride and span multiples
// of Pack::kSize, aligned rows; checked by the launcher).
template <typename T, bool PACKED>
__global__ void __launch_bounds__(kPickThreads)
    argmax_logprob_kernel(const T* __restrict__ x, int64_t cols, int64_t row_stride, int64_t span,
                          int64_t* __restrict__ index, float* __restrict__ logprob, float* __restrict__ part_ms,
                          int64_t* __restrict__ part_i) {
  const T* row = x + static_cast<int64_t>(blockIdx.x) * row_stride;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * span;
  const int64_t end = begin + span < cols ? begin + span : cols;
  PickState st{-INFINITY, 0.f, INT64_MAX};
  if constexpr (PACKED) {
    using P = Pack<T>;
    const P* packs = reinterpret_cast<const P*>(row);
    for (int64_t pi = begin / P::kSize + threadIdx.x; pi < end / P::kSize; pi += kPickThreads) {
      const P pk = packs[pi];
#pragma unroll
      for (int e = 0; e < P::kSize; e++) pick_add(st, load(&pk.v[e]), pi * P::kSize + e);
    }
  } else {
    for (int64_t c = begin + threadIdx.x; c < end; c += kPickThreads) pick_add(st, load(row + c), c);
  }
  st = pick_warp_merge(st);
  __shared__ PickState warps[kPickThreads / 32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = st;
  __syncthreads();
  if (warp != 0) return;
  st = pick_warp_merge(warps[lane]);  // kPickThreads / 32 == 32 warps: one per lane
  if (lane != 0) return;
  if (gridDim.y == 1) {
    pick_store(st, blockIdx.x, index, logprob);
  } else {
    const int64_t at = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
    part_ms[2 * at] = st.m;
    part_ms[2 * at + 1] = st.s;
    part_i[at] = st.i;
  }
}

// One warp per row: combines the row's parts (at most 32).
__global__ void argmax_logprob_merge(const float* __restrict__ part_ms, const int64_t* __restrict__ part_i, int parts,
                                     int64_t* __restrict__ index, float* __restrict__ logprob) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * parts + threadIdx.x;
  PickState st{-INFINITY, 0.f, INT64_MAX};
  if (static_cast<int>(threadIdx.x) < parts) st = PickState{part_ms[2 * at], part_ms[2 * at + 1], part_i[at]};
  st = pick_warp_merge(st);
  if (threadIdx.x == 0) pick_store(st, blockIdx.x, index, logprob);
}
static_assert(kPickThreads == 32 * 32, "the second reduction takes one warp's worth of warps");

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

template <typename T, int D, bool ROPE>
const char* launch_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const auto partial = slot_decode_attention_partial<T, D, ROPE>;
  constexpr size_t kSmem = AttnSmem<T, D>::kBytes;
  if constexpr (kSmem > 48 * 1024) {
    // Above the default limit (float32): opt in once per instantiation.
    static const cudaError_t opted = cudaFuncSetAttribute(partial, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (opted != cudaSuccess) return cudaGetErrorString(opted);
  }
  const auto batch = static_cast<unsigned>(a.batch);
  const auto kv_heads = static_cast<unsigned>(a.kv_heads);
  const auto chunks = static_cast<unsigned>((a.groups + kAttnHeads - 1) / kAttnHeads);
  const auto splits = static_cast<unsigned>(slot_decode_attention_splits(a.max_length));
  partial<<<dim3(batch, kv_heads * chunks, splits), kAttnThreads, kSmem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k_new), static_cast<const T*>(a.v_new),
      static_cast<const T*>(a.cos), static_cast<const T*>(a.sin), static_cast<T*>(a.k_cache),
      static_cast<T*>(a.v_cache), a.write_index, a.part_o, a.part_ml, a.q_row, a.k_row, a.v_row, a.slot_tokens,
      static_cast<int>(a.kv_heads), static_cast<int>(a.groups), a.scale);
  const unsigned q_heads = kv_heads * static_cast<unsigned>(a.groups);
  slot_decode_attention_merge<T><<<dim3(batch, q_heads), D, 0, stream>>>(a.part_o, a.part_ml, static_cast<T*>(a.out),
                                                                         static_cast<int>(splits), D);
  return launched();
}

}  // namespace

bool slot_decode_attention_supported(int64_t groups, int64_t dim) {
  return (dim == 64 || dim == 128) && groups >= 1 && groups <= 1024;
}

int64_t slot_decode_attention_splits(int64_t max_length) {
  return max_length <= kAttnChunk ? 1 : (max_length + kAttnChunk - 1) / kAttnChunk;
}

const char* slot_decode_attention(Dtype dtype, const DecodeAttentionArgs& a, void* stream) {
  if (!slot_decode_attention_supported(a.groups, a.dim)) return "slot_decode_attention: unsupported head layout";
  if (!aligned16(a.q) || !aligned16(a.k_cache) || !aligned16(a.v_cache) || !aligned16(a.cos) || !aligned16(a.sin))
    return "slot_decode_attention: q, the caches and cos / sin must be 16-byte aligned";
  if ((a.cos == nullptr) != (a.sin == nullptr)) return "slot_decode_attention: cos and sin go together";
  if (a.batch == 0) return nullptr;
  const char* error = nullptr;
  const char* dispatched = dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const bool rope = a.cos != nullptr;
    const auto launch = a.dim == 64 ? (rope ? launch_decode_attention<T, 64, true> : launch_decode_attention<T, 64, false>)
                                    : (rope ? launch_decode_attention<T, 128, true> : launch_decode_attention<T, 128, false>);
    error = launch(a, static_cast<cudaStream_t>(stream));
  });
  return error != nullptr ? error : dispatched;
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

int64_t argmax_logprob_parts(int64_t rows, int64_t cols) {
  // About 256 blocks in all, and no part under 8192 columns.
  int64_t parts = (256 + rows - 1) / rows;
  parts = parts < cols / 8192 ? parts : cols / 8192;
  return parts < 1 ? 1 : parts > 32 ? 32 : parts;
}

const char* argmax_logprob(Dtype dtype, const void* x, int64_t rows, int64_t cols, int64_t row_stride, int64_t* index,
                           float* logprob, float* part_ms, int64_t* part_i, void* stream) {
  if (rows == 0) return nullptr;
  if (cols == 0) return "argmax_logprob: rows of no values";
  const int64_t parts = argmax_logprob_parts(rows, cols);
  if (parts > 1 && (part_ms == nullptr || part_i == nullptr)) return "argmax_logprob: no scratch for the parts";
  return dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto s = static_cast<cudaStream_t>(stream);
    const int64_t pack = Pack<T>::kSize;
    const bool packed = cols % pack == 0 && row_stride % pack == 0 && aligned16(x);
    const int64_t span = ((cols + parts - 1) / parts + pack - 1) / pack * pack;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(parts));
    if (packed) {
      argmax_logprob_kernel<T, true><<<grid, kPickThreads, 0, s>>>(static_cast<const T*>(x), cols, row_stride, span,
                                                                    index, logprob, part_ms, part_i);
    } else {
      argmax_logprob_kernel<T, false><<<grid, kPickThreads, 0, s>>>(static_cast<const T*>(x), cols, row_stride, span,
                                                                     index, logprob, part_ms, part_i);
    }
    if (parts > 1) {
      argmax_logprob_merge<<<static_cast<unsigned>(rows), 32, 0, s>>>(part_ms, part_i, static_cast<int>(parts), index,
                                                                       logprob);
    }
  });
}

}  // namespace vt::kernels
