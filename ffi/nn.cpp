// Neural-network functions: the building blocks of vagen's models.
#include "shim.h"

#include <cmath>
#include <limits>

using vt::T;

VT_API int32_t vt_linear(void* x, void* w, void* b, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::linear(T(x), T(w), vt::opt(b)));
  VT_CATCH
}

VT_API int32_t vt_embedding(void* ids, void* weight, int64_t padding_idx, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::embedding(T(weight), T(ids), padding_idx));
  VT_CATCH
}

VT_API int32_t vt_layer_norm(void* x, const double* shape, int32_t ndim, void* w, void* b, double eps, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::layer_norm(T(x), vt::ints(shape, ndim), vt::opt(w), vt::opt(b), eps));
  VT_CATCH
}

VT_API int32_t vt_group_norm(void* x, int64_t groups, void* w, void* b, double eps, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::group_norm(T(x), groups, vt::opt(w), vt::opt(b), eps));
  VT_CATCH
}

// N-d convolution (n = 1, 2 or 3 spatial dims): stride/padding/dilation hold n values each.
VT_API int32_t vt_conv(void* x, void* w, void* b, const double* stride, const double* padding, const double* dilation,
                       int32_t n, int64_t groups, double* out) {
  VT_TRY
  std::vector<int64_t> output_padding(static_cast<size_t>(n), 0);
  out[0] = vt::wrap(at::convolution(T(x), T(w), vt::opt(b), vt::ints(stride, n), vt::ints(padding, n),
                                    vt::ints(dilation, n), /*transposed=*/false, output_padding, groups));
  VT_CATCH
}

VT_API int32_t vt_dropout(void* x, double p, int32_t train, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::dropout(T(x), p, train != 0));
  VT_CATCH
}

// reduction: 0 none, 1 mean, 2 sum (ATen's at::Reduction values).
VT_API int32_t vt_cross_entropy(void* logits, void* target, void* weight, int32_t reduction, int64_t ignore_index,
                                double label_smoothing, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::cross_entropy_loss(T(logits), T(target), vt::opt(weight), reduction, ignore_index,
                                           label_smoothing));
  VT_CATCH
}

namespace {

// Grouped-query attention: repeat each key/value head so that k and v have as many heads
// as q (dim -3 is the head dim in [batch, heads, seq, head_dim]).
at::Tensor repeat_kv(const at::Tensor& kv, int64_t q_heads) {
  const int64_t kv_heads = kv.size(-3);
  if (kv_heads == q_heads) return kv;
  TORCH_CHECK(q_heads % kv_heads == 0, "query heads (", q_heads, ") must be a multiple of key/value heads (",
              kv_heads, ")");
  return kv.repeat_interleave(q_heads / kv_heads, -3);
}

// Reference attention, written out op by op. Used where libtorch has no public fused
// kernel (1.13). Semantics follow torch.nn.functional.scaled_dot_product_attention:
// the causal mask is aligned top-left, a bool mask marks positions that may attend,
// a float mask is added to the scores.
at::Tensor attention_math(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const vt::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                          vt::optional<double> scale) {
  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * s;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), neg_inf);
  }
  if (mask.has_value()) {
    if (mask->scalar_type() == at::kBool) scores = scores.masked_fill(mask->logical_not(), neg_inf);
    else scores = scores + *mask;
  }
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0) weights = at::dropout(weights, dropout_p, true);
  return at::matmul(weights, v);
}

}  // namespace

// q: [..., Hq, L, E], k/v: [..., Hkv, S, E]. has_scale=0 uses 1/sqrt(E). gqa=1 allows
// Hkv < Hq. force_math=1 skips the fused kernels (for tests comparing the two paths).
VT_API int32_t vt_sdpa(void* qh, void* kh, void* vh, void* mask, double dropout_p, int32_t is_causal,
                       int32_t has_scale, double scale, int32_t gqa, int32_t force_math, double* out) {
  VT_TRY
  const at::Tensor& q = T(qh);
  at::Tensor k = T(kh);
  at::Tensor v = T(vh);
  vt::optional<double> sc = has_scale ? vt::optional<double>(scale) : vt::nullopt;
  at::Tensor result;
#if VT_TORCH_AT_LEAST(2, 5)
  if (!force_math) {
    result = at::scaled_dot_product_attention(q, k, v, vt::opt(mask), dropout_p, is_causal != 0, sc, gqa != 0);
  }
#elif VT_TORCH_AT_LEAST(2, 1)
  if (!force_math) {
    if (gqa) {
      k = repeat_kv(k, q.size(-3));
      v = repeat_kv(v, q.size(-3));
    }
    result = at::scaled_dot_product_attention(q, k, v, vt::opt(mask), dropout_p, is_causal != 0, sc);
  }
#endif
  if (!result.defined()) {
    if (gqa) {
      k = repeat_kv(k, q.size(-3));
      v = repeat_kv(v, q.size(-3));
    }
    result = attention_math(q, k, v, vt::opt(mask), dropout_p, is_causal != 0, sc);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_has_fused_sdpa() {
  VT_TRY
  return VT_TORCH_AT_LEAST(2, 1) ? 1 : 0;
  VT_CATCH_RETURN(0)
}

// Pads the last dims: `pad` holds (left, right) pairs starting from the last dim, like
// torch.nn.functional.pad. mode 0 constant, 1 reflect, 2 replicate.
VT_API int32_t vt_pad(void* x, const double* pad, int32_t n, int32_t mode, double value, double* out) {
  VT_TRY
  auto p = vt::ints(pad, n);
  at::Tensor result;
  switch (mode) {
    case 0: result = at::constant_pad_nd(T(x), p, value); break;
    case 1: result = n == 2 ? at::reflection_pad1d(T(x), p) : at::reflection_pad2d(T(x), p); break;
    case 2: result = n == 2 ? at::replication_pad1d(T(x), p) : at::replication_pad2d(T(x), p); break;
    default: throw std::invalid_argument("unknown pad mode");
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

// Bilinear / nearest resize of [N, C, H, W] images (image preprocessing on device).
VT_API int32_t vt_interpolate(void* x, int64_t h, int64_t w, int32_t mode, int32_t align_corners, double* out) {
  VT_TRY
  at::Tensor result;
  if (mode == 0) result = at::upsample_nearest2d(T(x), {h, w});
  else if (mode == 1) result = at::upsample_bilinear2d(T(x), {h, w}, align_corners != 0);
  else if (mode == 2) result = at::upsample_bicubic2d(T(x), {h, w}, align_corners != 0);
  else throw std::invalid_argument("unknown interpolate mode");
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

// Which fused attention kernels scaled_dot_product_attention may pick (torch >= 2.0):
// each flag 1 enables, 0 disables, -1 leaves it. out: the resulting
// [flash, memory-efficient, cudnn, math] states (all 0 where libtorch has no such switch).
VT_API int32_t vt_sdp_backends(int32_t flash, int32_t mem_efficient, int32_t cudnn, int32_t math, double* out) {
  VT_TRY
  for (int i = 0; i < 4; i++) out[i] = 0;
#if VT_TORCH_AT_LEAST(2, 0)
  auto& ctx = at::globalContext();
  if (flash >= 0) ctx.setSDPUseFlash(flash != 0);
  if (mem_efficient >= 0) ctx.setSDPUseMemEfficient(mem_efficient != 0);
  if (math >= 0) ctx.setSDPUseMath(math != 0);
  out[0] = ctx.userEnabledFlashSDP() ? 1 : 0;
  out[1] = ctx.userEnabledMemEfficientSDP() ? 1 : 0;
  out[3] = ctx.userEnabledMathSDP() ? 1 : 0;
#if VT_TORCH_AT_LEAST(2, 4)
  if (cudnn >= 0) ctx.setSDPUseCuDNN(cudnn != 0);
  out[2] = ctx.userEnabledCuDNNSDP() ? 1 : 0;
#else
  (void)cudnn;
#endif
#else
  (void)flash, (void)mem_efficient, (void)cudnn, (void)math;
#endif
  VT_CATCH
}
