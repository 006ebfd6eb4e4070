// vagen's own CUDA kernels (ffi/kernels.cu): a few fused elementwise steps of a decoder
// layer that libtorch runs as several kernels each. They take raw device pointers and a
// stream, so kernels.cu needs only the CUDA toolkit, not libtorch's headers; ffi/fused.cpp
// checks shapes, dtypes and devices and calls them.
//
// Each reproduces the rounding of the composite it replaces (the Hugging Face recipe in
// half precision: every op computes in float32 and rounds to the storage dtype), so
// fused and composite results differ only in the order of the float32 sum in RMSNorm.
//
// Launchers return nullptr on success, otherwise CUDA's error string.
#pragma once

#include <cstdint>

namespace vt::kernels {

// Storage dtypes the kernels handle.
enum class Dtype : int32_t { F32 = 0, BF16 = 1, F16 = 2 };

// Rows of `hidden` values: s = x + residual (rounded; skipped when residual is null),
// y = round(s * rsqrt(mean(s^2) + eps)) * weight (weight may be null). Writes s to
// sum_out (when residual is given) and y to norm_out.
const char* add_rms_norm(Dtype dtype, const void* x, const void* residual, const void* weight, void* sum_out,
                         void* norm_out, int64_t rows, int64_t hidden, float eps, void* stream);

// Rotate-half rotary embedding of q (tokens, q_heads, dim) and k (tokens, k_heads, dim)
// with cos/sin (tokens, dim): out = x * cos + rotate_half(x) * sin, rotate_half(x1, x2)
// = (-x2, x1). One launch for both tensors. q and k may be column slices of a wider
// row (a packed qkv projection): q_row / k_row are their token strides in elements;
// heads and dims are dense. Outputs are contiguous.
const char* rotary(Dtype dtype, const void* q, const void* k, const void* cos, const void* sin, void* q_out,
                   void* k_out, int64_t tokens, int64_t q_heads, int64_t k_heads, int64_t dim, int64_t q_row,
                   int64_t k_row, void* stream);

// out (rows, cols, contiguous) = silu(gate) * up, where gate and up are (rows, cols) with
// dense columns and a row stride of in_row elements (two halves of a packed gate/up
// projection, or two contiguous tensors with in_row = cols).
const char* silu_mul(Dtype dtype, const void* gate, const void* up, void* out, int64_t rows, int64_t cols,
                     int64_t in_row, void* stream);

// Decode-step attention over a slot KV cache, one query token per row, grouped-query.
// Writes each row's new key and value at write_index and attends over positions 0..p of
// the row's slot (p = write_index % slot_tokens): causal by construction, no mask. Every
// p must be below max_length, which sets how many key splits run (part_o holds
// batch * kv_heads * groups * splits * dim floats, part_ml twice splits per head).
// Scores, softmax and the weighted sum run in float32. dim is 64 or 128; any group size.
struct DecodeAttentionArgs {
  // q: row b at q + b * q_row, (kv_heads * groups, dim) dense, 16-byte aligned rows.
  const void* q;
  // k_new, v_new: row b at k_new + b * k_row (v_row): (kv_heads, dim) dense, any alignment.
  const void* k_new;
  const void* v_new;
  // Rotary angles, row b at cos + b * dim, 16-byte aligned; or both null when q and k_new
  // arrive rotated. Rotated here, they round exactly as rotary() does.
  const void* cos;
  const void* sin;
  // (tokens, kv_heads, dim) contiguous, 16-byte aligned: slot s holds tokens
  // [s * slot_tokens, (s + 1) * slot_tokens).
  void* k_cache;
  void* v_cache;
  // (batch,) int64: the flat token row of each row's new position.
  const int64_t* write_index;
  float* part_o;
  float* part_ml;
  // (batch, kv_heads * groups, dim) contiguous.
  void* out;
  int64_t batch, kv_heads, groups, dim;
  int64_t q_row, k_row, v_row;
  int64_t slot_tokens, max_length;
  float scale;
};
bool slot_decode_attention_supported(int64_t groups, int64_t dim);
int64_t slot_decode_attention_splits(int64_t max_length);
const char* slot_decode_attention(Dtype dtype, const DecodeAttentionArgs& args, void* stream);

// Per row of x (rows, cols; dense columns, row_stride elements apart): index = the first
// position of the row's maximum, logprob = log_softmax(row) there = -log(sum(exp(row - max))),
// in float32, reading the row once. The greedy pick of a sampler. Long rows are split
// into argmax_logprob_parts(rows, cols) parts; above one, part_ms (2 floats per part) and
// part_i (one int64 per part) hold them between the two kernels.
int64_t argmax_logprob_parts(int64_t rows, int64_t cols);
const char* argmax_logprob(Dtype dtype, const void* x, int64_t rows, int64_t cols, int64_t row_stride, int64_t* index,
                           float* logprob, float* part_ms, int64_t* part_i, void* stream);

}  // namespace vt::kernels
