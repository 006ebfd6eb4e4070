// Fused decoder steps: RMSNorm (optionally with the residual add before it), rotary
// embedding of q and k, and silu(gate) * up.
//
// Each entry has two paths with the same semantics:
//   * composite: libtorch ops, differentiable, on every device and libtorch version;
//   * fused: one of vagen's CUDA kernels (ffi/kernels.cu), used on CUDA when nothing
//     needs gradients (serving, rollouts, evaluation) and the inputs are contiguous
//     float32/bf16/fp16. A decode step of a 36-layer model launches a few hundred fewer
//     kernels this way, which is most of its time at small and medium batch sizes.
// vt_set_fused_kernels(0) forces the composite path (for A/B checks and benchmarks).
#include "shim.h"

#include <algorithm>

#ifdef VAGEN_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels.h"
#endif

using vt::T;

namespace {

std::atomic<bool> fused_enabled{true};

bool needs_grad(std::initializer_list<const at::Tensor*> tensors) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : tensors)
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  return false;
}

#ifdef VAGEN_WITH_CUDA_KERNELS
bool kernel_dtype(at::ScalarType s, vt::kernels::Dtype* out) {
  switch (s) {
    case at::kFloat:
      *out = vt::kernels::Dtype::F32;
      return true;
    case at::kBFloat16:
      *out = vt::kernels::Dtype::BF16;
      return true;
    case at::kHalf:
      *out = vt::kernels::Dtype::F16;
      return true;
    default:
      return false;
  }
}

// The fused path applies when every tensor is a CUDA tensor of the first one's dtype and
// device and nothing needs gradients; with `contiguous`, every tensor is also contiguous
// (otherwise the caller checks layouts itself).
bool use_kernel(std::initializer_list<const at::Tensor*> tensors, vt::kernels::Dtype* dtype, bool contiguous = true) {
  if (!fused_enabled.load(std::memory_order_relaxed) || needs_grad(tensors)) return false;
  const at::Tensor* first = *tensors.begin();
  if (!first->is_cuda() || !kernel_dtype(first->scalar_type(), dtype)) return false;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (t->device() != first->device() || t->scalar_type() != first->scalar_type()) return false;
    if (contiguous && !t->is_contiguous()) return false;
  }
  return true;
}

// Viewing t as rows of its last `inner` dims: the stride between rows when those dims
// are dense and the leading dims step uniformly (a column slice of a contiguous matrix
// qualifies), else -1.
int64_t row_stride(const at::Tensor& t, int64_t inner) {
  int64_t dense = 1;
  for (int64_t d = t.dim() - 1; d >= t.dim() - inner; d--) {
    if (t.size(d) != 1 && t.stride(d) != dense) return -1;
    dense *= t.size(d);
  }
  int64_t row = -1;
  int64_t rows = 1;
  for (int64_t d = t.dim() - inner - 1; d >= 0; d--) {
    if (t.size(d) == 1) continue;
    if (row < 0) row = t.stride(d);
    else if (t.stride(d) != row * rows) return -1;
    rows *= t.size(d);
  }
  if (row < 0) return dense;  // a single row
  return row >= dense ? row : -1;
}

void* stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

void check(const char* err, const char* what) { TORCH_CHECK(err == nullptr, what, ": ", err); }
#endif

// Hugging Face's Qwen2/LLaMA RMSNorm: normalise in float32 (float64 stays float64), cast
// back, then scale by the weight in the input dtype.
at::Tensor rms_norm_composite(const at::Tensor& x, const at::Tensor* weight, double eps) {
  at::Tensor h = x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = (h * at::rsqrt(variance + eps)).to(x.scalar_type());
  return weight != nullptr ? *weight * h : h;
}

void check_norm_weight(const at::Tensor& x, const at::Tensor* weight) {
  TORCH_CHECK(x.dim() >= 1, "rms_norm needs at least one dimension");
  if (weight != nullptr) {
    TORCH_CHECK(weight->dim() == 1 && weight->size(0) == x.size(-1), "rms_norm weight has shape ", weight->sizes(),
                ", expected [", x.size(-1), "] (the last dimension of the input)");
  }
}

}  // namespace

VT_API void vt_set_fused_kernels(int32_t enabled) {
  VT_TRY
  fused_enabled.store(enabled != 0);
  VT_CATCH_VOID
}

// 1 when this build has vagen's CUDA kernels (and they are enabled).
VT_API int32_t vt_fused_kernels() {
  VT_TRY
#ifdef VAGEN_WITH_CUDA_KERNELS
  return fused_enabled.load() ? 1 : 0;
#else
  return 0;
#endif
  VT_CATCH_RETURN(0)
}

VT_API int32_t vt_rms_norm(void* xh, void* wh, double eps, double* out) {
  VT_TRY
  const at::Tensor& x = T(xh);
  const at::Tensor* w = wh != nullptr ? &T(wh) : nullptr;
  check_norm_weight(x, w);
#ifdef VAGEN_WITH_CUDA_KERNELS
  vt::kernels::Dtype dtype;
  if (use_kernel({&x, w}, &dtype)) {
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor y = at::empty_like(x);
    check(vt::kernels::add_rms_norm(dtype, x.data_ptr(), nullptr, w ? w->data_ptr() : nullptr, nullptr, y.data_ptr(),
                                    x.numel() / x.size(-1), x.size(-1), static_cast<float>(eps), stream_of(x)),
          "rms_norm kernel");
    out[0] = vt::wrap(std::move(y));
    return 0;
  }
#endif
  out[0] = vt::wrap(rms_norm_composite(x, w, eps));
  VT_CATCH
}

// s = x + residual, y = rms_norm(s) * weight: the residual add of one block and the norm
// that opens the next. out: [s, y].
VT_API int32_t vt_add_rms_norm(void* xh, void* rh, void* wh, double eps, double* out) {
  VT_TRY
  const at::Tensor& x = T(xh);
  const at::Tensor& r = T(rh);
  const at::Tensor* w = wh != nullptr ? &T(wh) : nullptr;
  check_norm_weight(x, w);
  TORCH_CHECK(x.sizes().equals(r.sizes()), "add_rms_norm: input ", x.sizes(), " and residual ", r.sizes(),
              " must have the same shape");
#ifdef VAGEN_WITH_CUDA_KERNELS
  vt::kernels::Dtype dtype;
  if (use_kernel({&x, &r, w}, &dtype)) {
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor s = at::empty_like(x);
    at::Tensor y = at::empty_like(x);
    check(vt::kernels::add_rms_norm(dtype, x.data_ptr(), r.data_ptr(), w ? w->data_ptr() : nullptr, s.data_ptr(),
                                    y.data_ptr(), x.numel() / x.size(-1), x.size(-1), static_cast<float>(eps),
                                    stream_of(x)),
          "add_rms_norm kernel");
    out[0] = vt::wrap(std::move(s));
    out[1] = vt::wrap(std::move(y));
    return 0;
  }
#endif
  at::Tensor s = x + r;
  out[1] = vt::wrap(rms_norm_composite(s, w, eps));
  out[0] = vt::wrap(std::move(s));
  VT_CATCH
}

// Rotate-half rotary embedding. q: (..., q_heads, dim), k: (..., k_heads, dim), cos/sin:
// (..., dim) with the same leading dims as q and k. out: [q_rotated, k_rotated].
VT_API int32_t vt_rotary(void* qh, void* kh, void* ch, void* sh, double* out) {
  VT_TRY
  const at::Tensor& q = T(qh);
  const at::Tensor& k = T(kh);
  const at::Tensor& c = T(ch);
  const at::Tensor& s = T(sh);
  TORCH_CHECK(q.dim() >= 2 && k.dim() == q.dim() && c.dim() == q.dim() - 1 && s.sizes().equals(c.sizes()),
              "rotary: expected q (..., heads, dim), k (..., heads, dim) and cos/sin (..., dim); got q ", q.sizes(),
              ", k ", k.sizes(), ", cos ", c.sizes(), ", sin ", s.sizes());
  const int64_t dim = q.size(-1);
  TORCH_CHECK(dim % 2 == 0 && k.size(-1) == dim && c.size(-1) == dim, "rotary: q, k, cos and sin need the same even last dimension");
  TORCH_CHECK(q.sizes().slice(0, q.dim() - 2).equals(c.sizes().slice(0, c.dim() - 1)) &&
                  k.sizes().slice(0, k.dim() - 2).equals(c.sizes().slice(0, c.dim() - 1)),
              "rotary: the leading dims of q ", q.sizes(), ", k ", k.sizes(), " and cos ", c.sizes(), " must match");
#ifdef VAGEN_WITH_CUDA_KERNELS
  vt::kernels::Dtype dtype;
  const int64_t q_row = row_stride(q, 2);
  const int64_t k_row = row_stride(k, 2);
  if (q_row >= 0 && k_row >= 0 && c.is_contiguous() && s.is_contiguous() && use_kernel({&q, &k, &c, &s}, &dtype, false)) {
    c10::cuda::CUDAGuard guard(q.device());
    at::Tensor qo = at::empty(q.sizes(), q.options());
    at::Tensor ko = at::empty(k.sizes(), k.options());
    check(vt::kernels::rotary(dtype, q.data_ptr(), k.data_ptr(), c.data_ptr(), s.data_ptr(), qo.data_ptr(),
                              ko.data_ptr(), c.numel() / dim, q.size(-2), k.size(-2), dim, q_row, k_row, stream_of(q)),
          "rotary kernel");
    out[0] = vt::wrap(std::move(qo));
    out[1] = vt::wrap(std::move(ko));
    return 0;
  }
#endif
  const at::Tensor cu = c.unsqueeze(-2);
  const at::Tensor su = s.unsqueeze(-2);
  auto rotate = [&](const at::Tensor& x) {
    const at::Tensor x1 = x.narrow(-1, 0, dim / 2);
    const at::Tensor x2 = x.narrow(-1, dim / 2, dim / 2);
    return x * cu + at::cat({-x2, x1}, -1) * su;
  };
  out[0] = vt::wrap(rotate(q));
  out[1] = vt::wrap(rotate(k));
  VT_CATCH
}

VT_API int32_t vt_silu_mul(void* gh, void* uh, double* out) {
  VT_TRY
  const at::Tensor& g = T(gh);
  const at::Tensor& u = T(uh);
  TORCH_CHECK(g.sizes().equals(u.sizes()), "silu_mul: gate ", g.sizes(), " and up ", u.sizes(), " must have the same shape");
#ifdef VAGEN_WITH_CUDA_KERNELS
  vt::kernels::Dtype dtype;
  const int64_t g_row = g.dim() > 0 ? row_stride(g, 1) : -1;
  if (g_row >= 0 && g_row == row_stride(u, 1) && use_kernel({&g, &u}, &dtype, false)) {
    c10::cuda::CUDAGuard guard(g.device());
    at::Tensor y = at::empty(g.sizes(), g.options());
    const int64_t cols = g.size(-1);
    check(vt::kernels::silu_mul(dtype, g.data_ptr(), u.data_ptr(), y.data_ptr(), g.numel() / std::max<int64_t>(cols, 1), cols,
                                g_row, stream_of(g)),
          "silu_mul kernel");
    out[0] = vt::wrap(std::move(y));
    return 0;
  }
#endif
  out[0] = vt::wrap(at::silu(g) * u);
  VT_CATCH
}

// Decode-step attention of a serving engine's slot KV cache (see kernels.h): writes each
// row's new key and value at write_index and attends over the row's slot up to there.
// Every row's new position must be below max_length (it sizes the split over keys).
//   q: (B, q_heads, 1, dim); k, v: (B, kv_heads, 1, dim), dense per row
//   k_cache, v_cache: (tokens, kv_heads, dim) contiguous; write_index: (B,) int64
// out[0]: (B, q_heads, 1, dim), or 0 when the fused kernel does not apply (CPU, a build
// without the kernels, gradients, an unsupported head layout): the caller then writes
// the cache and runs scaled_dot_product_attention itself.
VT_API int32_t vt_argmax_logprob(void* xh, double* out) {
  VT_TRY
  const at::Tensor& x = T(xh);
  TORCH_CHECK(x.dim() == 2 && x.size(1) > 0, "argmax_logprob: expected logits (rows, vocab); got ", x.sizes());
#ifdef VAGEN_WITH_CUDA_KERNELS
  vt::kernels::Dtype dtype;
  if (x.stride(1) == 1 && use_kernel({&x}, &dtype, false)) {
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor index = at::empty({x.size(0)}, x.options().dtype(at::kLong));
    at::Tensor logprob = at::empty({x.size(0)}, x.options().dtype(at::kFloat));
    const int64_t parts = vt::kernels::argmax_logprob_parts(x.size(0), x.size(1));
    at::Tensor part_ms = at::empty({x.size(0) * parts * 2}, x.options().dtype(at::kFloat));
    at::Tensor part_i = at::empty({x.size(0) * parts}, x.options().dtype(at::kLong));
    check(vt::kernels::argmax_logprob(dtype, x.data_ptr(), x.size(0), x.size(1), x.stride(0), index.data_ptr<int64_t>(),
                                      logprob.data_ptr<float>(), part_ms.data_ptr<float>(),
                                      part_i.data_ptr<int64_t>(), stream_of(x)),
          "argmax_logprob kernel");
    out[0] = vt::wrap(std::move(index));
    out[1] = vt::wrap(std::move(logprob));
    return 0;
  }
#endif
  // The composite: float32 log softmax, read at the argmax.
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor index = xf.argmax(1);
  out[0] = vt::wrap(index);
  out[1] = vt::wrap(at::log_softmax(xf, 1).gather(1, index.unsqueeze(1)).squeeze(1));
  VT_CATCH
}

VT_API int32_t vt_slot_decode_attention(void* qh, void* kh, void* vh, void* kch, void* vch, void* wih, void* cosh,
                                        void* sinh, int64_t slot_tokens, int64_t max_length, double scale, double* out) {
  VT_TRY
  out[0] = 0;
#ifdef VAGEN_WITH_CUDA_KERNELS
  const at::Tensor& q = T(qh);
  const at::Tensor& k = T(kh);
  const at::Tensor& v = T(vh);
  const at::Tensor& kc = T(kch);
  const at::Tensor& vc = T(vch);
  const at::Tensor& wi = T(wih);
  TORCH_CHECK((cosh == nullptr) == (sinh == nullptr), "slot_decode_attention: cos and sin go together");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(2) == 1 && k.sizes().equals(v.sizes()) &&
                  k.size(2) == 1 && k.size(0) == q.size(0) && k.size(3) == q.size(3),
              "slot_decode_attention: expected q (B, heads, 1, dim) and k, v (B, kv_heads, 1, dim); got q ", q.sizes(),
              ", k ", k.sizes(), ", v ", v.sizes());
  const int64_t batch = q.size(0), kv_heads = k.size(1), dim = q.size(3);
  TORCH_CHECK(q.size(1) % kv_heads == 0, "slot_decode_attention: query heads must be a multiple of kv heads");
  TORCH_CHECK(kc.dim() == 3 && kc.size(1) == kv_heads && kc.size(2) == dim && kc.sizes().equals(vc.sizes()),
              "slot_decode_attention: caches must be (tokens, kv_heads, dim)");
  TORCH_CHECK(wi.dim() == 1 && wi.size(0) == batch, "slot_decode_attention: write_index must be (B,)");
  const at::Tensor* cos = cosh != nullptr ? &T(cosh) : nullptr;
  const at::Tensor* sin = sinh != nullptr ? &T(sinh) : nullptr;
  if (cos != nullptr) {
    TORCH_CHECK(cos->numel() == batch * dim && sin->numel() == batch * dim,
                "slot_decode_attention: cos and sin must hold one row of dim angles per batch row; got ", cos->sizes(),
                " and ", sin->sizes());
  }
  const int64_t groups = q.size(1) / kv_heads;
  // Per row: heads then dims dense; rows anywhere (stride of dim 0). q and the caches are
  // read in 16-byte packs, so their rows must start on 16-byte boundaries.
  auto dense_rows = [&](const at::Tensor& t) { return t.stride(3) == 1 && (t.size(1) == 1 || t.stride(1) == dim); };
  auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  const bool q_rows_aligned = aligned(q) && (batch == 1 || (q.stride(0) * q.element_size()) % 16 == 0);
  const bool angles_fit = cos == nullptr || (cos->is_contiguous() && sin->is_contiguous() && aligned(*cos) &&
                                             aligned(*sin) && cos->device() == q.device());
  vt::kernels::Dtype dtype;
  const bool applies = vt::kernels::slot_decode_attention_supported(groups, dim) && dense_rows(q) && q_rows_aligned &&
                       dense_rows(k) && dense_rows(v) && kc.is_contiguous() && vc.is_contiguous() && aligned(kc) &&
                       aligned(vc) && angles_fit && wi.is_contiguous() && wi.scalar_type() == at::kLong &&
                       wi.device() == q.device() && use_kernel({&q, &k, &v, &kc, &vc, cos, sin}, &dtype, false);
  if (applies) {
    c10::cuda::CUDAGuard guard(q.device());
    TORCH_CHECK(max_length >= 1 && max_length <= slot_tokens, "slot_decode_attention: max_length ", max_length,
                " must be within 1..", slot_tokens);
    at::Tensor o = at::empty({batch, 1, q.size(1), dim}, q.options());
    const int64_t splits = vt::kernels::slot_decode_attention_splits(max_length);
    const auto f32 = q.options().dtype(at::kFloat);
    at::Tensor part_o = at::empty({batch * q.size(1) * splits * dim}, f32);
    at::Tensor part_ml = at::empty({batch * q.size(1) * splits * 2}, f32);
    vt::kernels::DecodeAttentionArgs a{};
    a.q = q.data_ptr();
    a.k_new = k.data_ptr();
    a.v_new = v.data_ptr();
    a.cos = cos != nullptr ? cos->data_ptr() : nullptr;
    a.sin = sin != nullptr ? sin->data_ptr() : nullptr;
    a.k_cache = kc.data_ptr();
    a.v_cache = vc.data_ptr();
    a.write_index = wi.data_ptr<int64_t>();
    a.part_o = part_o.data_ptr<float>();
    a.part_ml = part_ml.data_ptr<float>();
    a.out = o.data_ptr();
    a.batch = batch;
    a.kv_heads = kv_heads;
    a.groups = groups;
    a.dim = dim;
    a.q_row = q.stride(0);
    a.k_row = k.stride(0);
    a.v_row = v.stride(0);
    a.slot_tokens = slot_tokens;
    a.max_length = max_length;
    a.scale = static_cast<float>(scale);
    check(vt::kernels::slot_decode_attention(dtype, a, stream_of(q)), "slot_decode_attention kernel");
    out[0] = vt::wrap(o.transpose(1, 2));
  }
#else
  (void)qh, (void)kh, (void)vh, (void)kch, (void)vch, (void)wih, (void)cosh, (void)sinh, (void)slot_tokens,
      (void)max_length, (void)scale;
#endif
  VT_CATCH
}
