// Tensor operations, grouped by calling shape. Each group is an X-macro list, which
// generates the dispatch switch here, the op-name table the shim publishes (vt_op_table)
// and, through scripts/shim-bindings.ts, the op codes of src/torch/opcodes.ts (an op's
// code is its index in its list), so the two sides can never disagree about numbering.
// Adding, removing or reordering an op changes the ABI: bump VT_ABI_VERSION in shim.h.
#include "shim.h"

#include <cmath>
#include <sstream>

using vt::T;

// ---- a -> t --------------------------------------------------------------------------
#define VT_UNARY_OPS(X)                       \
  X(neg, at::neg(a))                          \
  X(abs, at::abs(a))                          \
  X(exp, at::exp(a))                          \
  X(log, at::log(a))                          \
  X(log2, at::log2(a))                        \
  X(log1p, at::log1p(a))                      \
  X(expm1, at::expm1(a))                      \
  X(sqrt, at::sqrt(a))                        \
  X(rsqrt, at::rsqrt(a))                      \
  X(sin, at::sin(a))                          \
  X(cos, at::cos(a))                          \
  X(tan, at::tan(a))                          \
  X(tanh, at::tanh(a))                        \
  X(sigmoid, at::sigmoid(a))                  \
  X(relu, at::relu(a))                        \
  X(silu, at::silu(a))                        \
  X(gelu, at::gelu(a))                        \
  X(gelu_tanh, at::gelu(a, "tanh"))           \
  X(erf, at::erf(a))                          \
  X(floor, at::floor(a))                      \
  X(ceil, at::ceil(a))                        \
  X(round, at::round(a))                      \
  X(trunc, at::trunc(a))                      \
  X(sign, at::sign(a))                        \
  X(reciprocal, at::reciprocal(a))            \
  X(square, at::square(a))                    \
  X(logical_not, at::logical_not(a))          \
  X(bitwise_not, at::bitwise_not(a))          \
  X(isnan, at::isnan(a))                      \
  X(isinf, at::isinf(a))                      \
  X(isfinite, at::isfinite(a))                \
  X(contiguous, a.contiguous())               \
  X(clone, a.clone())                         \
  X(detach, a.detach())                       \
  X(nonzero, at::nonzero(a))                  \
  X(t, a.t())                                 \
  X(sum_all, at::sum(a))                      \
  X(mean_all, at::mean(a))                    \
  X(max_all, at::max(a))                      \
  X(min_all, at::min(a))                      \
  X(argsort_stable, std::get<1>(a.sort(/*stable=*/true, -1, false)))

// ---- (a, b) -> t; add/sub use `alpha` -------------------------------------------------
#define VT_BINARY_OPS(X)                                 \
  X(add, at::add(a, b, alpha))                           \
  X(sub, at::sub(a, b, alpha))                           \
  X(mul, at::mul(a, b))                                  \
  X(div, at::div(a, b))                                  \
  X(pow, at::pow(a, b))                                  \
  X(maximum, at::maximum(a, b))                          \
  X(minimum, at::minimum(a, b))                          \
  X(eq, at::eq(a, b))                                    \
  X(ne, at::ne(a, b))                                    \
  X(lt, at::lt(a, b))                                    \
  X(le, at::le(a, b))                                    \
  X(gt, at::gt(a, b))                                    \
  X(ge, at::ge(a, b))                                    \
  X(matmul, at::matmul(a, b))                            \
  X(mm, at::mm(a, b))                                    \
  X(bmm, at::bmm(a, b))                                  \
  X(dot, at::dot(a, b))                                  \
  X(outer, at::outer(a, b))                              \
  X(logical_and, at::logical_and(a, b))                  \
  X(logical_or, at::logical_or(a, b))                    \
  X(logical_xor, at::logical_xor(a, b))                  \
  X(bitwise_and, at::bitwise_and(a, b))                  \
  X(bitwise_or, at::bitwise_or(a, b))                    \
  X(remainder, at::remainder(a, b))                      \
  X(fmod, at::fmod(a, b))                                \
  X(atan2, at::atan2(a, b))                              \
  X(floor_divide, at::div(a, b, "floor"))                \
  X(expand_as, a.expand_as(b))                           \
  X(type_as, a.type_as(b))                               \
  X(equal, at::scalar_tensor(at::equal(a, b) ? 1 : 0, at::kBool)) \
  X(mse_loss, at::mse_loss(a, b))                        \
  X(bce_with_logits, at::binary_cross_entropy_with_logits(a, b))

// ---- (a, scalar s) -> t ---------------------------------------------------------------
#define VT_SCALAR_OPS(X)                         \
  X(add, at::add(a, s))                          \
  X(sub, at::sub(a, s))                          \
  X(mul, at::mul(a, s))                          \
  X(div, at::div(a, s))                          \
  X(pow, at::pow(a, s))                          \
  X(eq, at::eq(a, s))                            \
  X(ne, at::ne(a, s))                            \
  X(lt, at::lt(a, s))                            \
  X(le, at::le(a, s))                            \
  X(gt, at::gt(a, s))                            \
  X(ge, at::ge(a, s))                            \
  X(remainder, at::remainder(a, s))              \
  X(fmod, at::fmod(a, s))                        \
  X(rsub, at::rsub(a, s))                        \
  X(rdiv, at::mul(at::reciprocal(a), s))         \
  X(rpow, at::pow(s, a))                         \
  X(floor_divide, at::div(a, at::scalar_tensor(s, a.options()), "floor")) \
  X(maximum, at::clamp_min(a, s))                \
  X(minimum, at::clamp_max(a, s))

// ---- in place: a.op_(b) / a.op_(s) -----------------------------------------------------
#define VT_INPLACE_BINARY_OPS(X)  \
  X(add, a.add_(b, alpha))        \
  X(sub, a.sub_(b, alpha))        \
  X(mul, a.mul_(b))               \
  X(div, a.div_(b))               \
  X(copy, a.copy_(b))             \
  X(maximum, a.copy_(at::maximum(a, b)))

#define VT_INPLACE_SCALAR_OPS(X) \
  X(add, a.add_(s))              \
  X(sub, a.sub_(s))              \
  X(mul, a.mul_(s))              \
  X(div, a.div_(s))              \
  X(pow, a.pow_(s))              \
  X(fill, a.fill_(s))            \
  X(clamp_min, a.clamp_min_(s))  \
  X(clamp_max, a.clamp_max_(s))

// ---- (a, dims, keepdim, dtype, p) -> t; an empty dims list reduces everything -----------
#define VT_REDUCE_OPS(X)                                                                     \
  X(sum, n == 0 ? at::sum(a, dt) : at::sum(a, dims, keepdim, dt))                            \
  X(mean, n == 0 ? at::mean(a, dt) : at::mean(a, dims, keepdim, dt))                         \
  X(amax, at::amax(a, dims, keepdim))                                                        \
  X(amin, at::amin(a, dims, keepdim))                                                        \
  X(logsumexp, at::logsumexp(a, dims_all, keepdim))                      \
  X(prod, n == 0 ? at::prod(a, dt) : at::prod(a, one_dim(dims, "prod"), keepdim, dt))        \
  X(all, n == 0 ? at::all(a) : at::all(a, one_dim(dims, "all"), keepdim))                    \
  X(any, n == 0 ? at::any(a) : at::any(a, one_dim(dims, "any"), keepdim))                    \
  X(var, at::var(a, dims_all, p != 0, keepdim))                           \
  X(std, at::std(a, dims_all, p != 0, keepdim))                           \
  X(norm, at::linalg_vector_norm(a, p, n == 0 ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(dims), keepdim, dt)) \
  X(count_nonzero, at::count_nonzero(a, dims))

// ---- (a, dim?, flag, dtype) -> t; flag is keepdim (argmax/argmin) or descending (argsort)-------------------------------------------------
#define VT_DIM_OPS(X)                                                                   \
  X(softmax, at::softmax(a, dim, dt))                                                   \
  X(log_softmax, at::log_softmax(a, dim, dt))                                           \
  X(cumsum, at::cumsum(a, dim, dt))                                                     \
  X(cumprod, at::cumprod(a, dim, dt))                                                   \
  X(argmax, has_dim ? at::argmax(a, dim, keepdim) : at::argmax(a))                      \
  X(argmin, has_dim ? at::argmin(a, dim, keepdim) : at::argmin(a))                      \
  X(argsort, std::get<1>(a.sort(dim, /*descending=*/keepdim)))                                         \
  X(squeeze, has_dim ? a.squeeze(dim) : a.squeeze())                                    \
  X(unsqueeze, a.unsqueeze(dim))                                                        \
  X(flatten_from, a.flatten(dim))

// ---- (a, i0..i3) -> t ---------------------------------------------------------------
#define VT_INT_OPS(X)                                                         \
  X(transpose, a.transpose(i0, i1))                                           \
  X(narrow, a.narrow(i0, i1, i2))                                             \
  X(slice, a.slice(i0, i1, i2, i3))                                           \
  X(select, a.select(i0, i1))                                                 \
  X(tril, at::tril(a, i0))                                                    \
  X(triu, at::triu(a, i0))                                                    \
  X(flatten, a.flatten(i0, i1))                                               \
  X(roll, at::roll(a, {i0}, {i1}))                                            \
  X(diagonal, at::diagonal(a, i0, i1, i2))                                    \
  X(movedim, at::movedim(a, i0, i1))                                          \
  X(repeat_interleave, at::repeat_interleave(a, i0, i1))                      \
  X(one_hot, at::one_hot(a, i0))                                              \
  X(unfold, a.unfold(i0, i1, i2))                                             \
  X(diag_embed, at::diag_embed(a, i0, i1, i2))

// ---- (a, int list) -> t -------------------------------------------------------------
#define VT_LIST_OPS(X)                    \
  X(reshape, a.reshape(list))             \
  X(view, a.view(list))                   \
  X(expand, a.expand(list))               \
  X(permute, a.permute(list))             \
  X(flip, at::flip(a, list))              \
  X(repeat, a.repeat(list))               \
  X(tile, at::tile(a, list))              \
  X(pad_zero, at::constant_pad_nd(a, list, 0))

// ---- (a, i0..i3) -> (t, t) -----------------------------------------------------------
#define VT_PAIR_OPS(X)                                   \
  X(max_dim, at::max(a, i0, i1 != 0))                    \
  X(min_dim, at::min(a, i0, i1 != 0))                    \
  X(sort, at::sort(a, i0, i1 != 0))                      \
  X(topk, at::topk(a, i0, i1, i2 != 0, i3 != 0))         \
  X(kthvalue, at::kthvalue(a, i0, i1, i2 != 0))          \
  X(var_mean, at::var_mean(a, dims_or_all(a, i0), i1 != 0, i2 != 0)) \
  X(std_mean, at::std_mean(a, dims_or_all(a, i0), i1 != 0, i2 != 0))

// ---- (a, dim, b, c, value) -> t: gather/scatter family ---------------------------------
#define VT_INDEX_OPS(X)                                                  \
  X(index_select, at::index_select(a, dim, b))                           \
  X(gather, at::gather(a, dim, b))                                       \
  X(scatter, at::scatter(a, dim, b, c))                                  \
  X(scatter_add, at::scatter_add(a, dim, b, c))                          \
  X(scatter_value, at::scatter(a, dim, b, s))                            \
  X(masked_fill, at::masked_fill(a, b, s))                               \
  X(masked_fill_tensor, at::masked_fill(a, b, c))                        \
  X(masked_select, at::masked_select(a, b))                              \
  X(take_along_dim, at::take_along_dim(a, b, dim))                       \
  X(index_add, at::index_add(a, dim, b, c))                              \
  X(index_copy, at::index_copy(a, dim, b, c))                            \
  X(index_fill, at::index_fill(a, dim, b, s))                            \
  X(index_put, at::index_put(a, index_list(b), c, false)) \
  X(index_put_accumulate, at::index_put(a, index_list(b), c, true)) \
  X(boolean_index, at::index(a, index_list(b)))

#define VT_INDEX_INPLACE_OPS(X)                                 \
  X(scatter, a.scatter_(dim, b, c))                             \
  X(scatter_add, a.scatter_add_(dim, b, c))                     \
  X(masked_fill, a.masked_fill_(b, s))                          \
  X(index_add, a.index_add_(dim, b, c))                         \
  X(index_copy, a.index_copy_(dim, b, c))                       \
  X(index_fill, a.index_fill_(dim, b, s))                       \
  X(index_put, a.index_put_(index_list(b), c, false))

// ---- (a, b, c, s1, s2) -> t -----------------------------------------------------------
#define VT_TERNARY_OPS(X)                                    \
  X(where, at::where(a, b, c))                               \
  X(addmm, at::addmm(a, b, c, s1, s2))                       \
  X(baddbmm, at::baddbmm(a, b, c, s1, s2))                   \
  X(addcmul, at::addcmul(a, b, c, s1))                       \
  X(addcdiv, at::addcdiv(a, b, c, s1))                       \
  X(lerp, at::lerp(a, b, c))                                 \
  X(clamp_tensor, at::clamp(a, vt::opt(bh), vt::opt(ch)))

// ---- op-name table --------------------------------------------------------------------
#define VT_NAME(name, expr) #name ","

namespace {

std::vector<int64_t> all_dims(const at::Tensor& a) {
  std::vector<int64_t> d(static_cast<size_t>(a.dim()));
  for (int64_t i = 0; i < a.dim(); i++) d[i] = i;
  return d;
}

int64_t one_dim(at::IntArrayRef dims, const char* op) {
  TORCH_CHECK(dims.size() == 1, op, " reduces over one dimension at a time, got ", dims.size());
  return dims[0];
}

// var_mean/std_mean: a dim of INT32_MIN (the TS "all dims" marker) reduces everything.
std::vector<int64_t> dims_or_all(const at::Tensor& a, int64_t dim) {
  if (dim == INT32_MIN) return all_dims(a);
  return {dim};
}

c10::List<vt::optional<at::Tensor>> index_list(const at::Tensor& index) {
  c10::List<vt::optional<at::Tensor>> list;
  list.push_back(index);
  return list;
}

std::string build_op_table() {
  std::ostringstream s;
  s << "unary:" VT_UNARY_OPS(VT_NAME) ";";
  s << "binary:" VT_BINARY_OPS(VT_NAME) ";";
  s << "scalar:" VT_SCALAR_OPS(VT_NAME) ";";
  s << "inplace_binary:" VT_INPLACE_BINARY_OPS(VT_NAME) ";";
  s << "inplace_scalar:" VT_INPLACE_SCALAR_OPS(VT_NAME) ";";
  s << "reduce:" VT_REDUCE_OPS(VT_NAME) ";";
  s << "dim:" VT_DIM_OPS(VT_NAME) ";";
  s << "int:" VT_INT_OPS(VT_NAME) ";";
  s << "list:" VT_LIST_OPS(VT_NAME) ";";
  s << "pair:" VT_PAIR_OPS(VT_NAME) ";";
  s << "index:" VT_INDEX_OPS(VT_NAME) ";";
  s << "index_inplace:" VT_INDEX_INPLACE_OPS(VT_NAME) ";";
  s << "ternary:" VT_TERNARY_OPS(VT_NAME) ";";
  return s.str();
}

#define VT_ENUM(name, expr) k_##name,
#define VT_CASE(name, expr) \
  case k_##name:            \
    result = (expr);        \
    break;
#define VT_CASE_INPLACE(name, expr) \
  case k_##name:                    \
    (expr);                         \
    break;

[[noreturn]] void bad_op(const char* group, int32_t op) {
  throw std::invalid_argument(std::string("unknown ") + group + " op code " + std::to_string(op));
}

}  // namespace

// The op lists by group, "unary:neg,abs,...,;binary:...;": src/torch/opcodes.ts is
// generated from the same lists, and native.ts compares the two once at load.
VT_API const char* vt_op_table() {
  VT_TRY
  static const std::string table = build_op_table();
  return table.c_str();
  VT_CATCH_RETURN("")
}

VT_API int32_t vt_unary(int32_t op, void* ah, double* out) {
  VT_TRY
  enum { VT_UNARY_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  at::Tensor result;
  switch (op) {
    VT_UNARY_OPS(VT_CASE)
    default: bad_op("unary", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_binary(int32_t op, void* ah, void* bh, double alpha_value, double* out) {
  VT_TRY
  // A whole alpha is an integer scalar, so integer tensors add and subtract (PyTorch's 1).
  const at::Scalar alpha = vt::scalar(alpha_value, std::floor(alpha_value) == alpha_value && std::fabs(alpha_value) < 9007199254740992.0);
  enum { VT_BINARY_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const at::Tensor& b = T(bh);
  at::Tensor result;
  switch (op) {
    VT_BINARY_OPS(VT_CASE)
    default: bad_op("binary", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_scalar(int32_t op, void* ah, double value, int32_t is_integral, double* out) {
  VT_TRY
  enum { VT_SCALAR_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const at::Scalar s = vt::scalar(value, is_integral);
  at::Tensor result;
  switch (op) {
    VT_SCALAR_OPS(VT_CASE)
    default: bad_op("scalar", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_inplace_binary(int32_t op, void* ah, void* bh, double alpha_value) {
  VT_TRY
  // A whole alpha is an integer scalar, so integer tensors add and subtract (PyTorch's 1).
  const at::Scalar alpha = vt::scalar(alpha_value, std::floor(alpha_value) == alpha_value && std::fabs(alpha_value) < 9007199254740992.0);
  enum { VT_INPLACE_BINARY_OPS(VT_ENUM) };
  at::Tensor& a = T(ah);
  const at::Tensor& b = T(bh);
  switch (op) {
    VT_INPLACE_BINARY_OPS(VT_CASE_INPLACE)
    default: bad_op("in-place binary", op);
  }
  VT_CATCH
}

VT_API int32_t vt_inplace_scalar(int32_t op, void* ah, double value, int32_t is_integral) {
  VT_TRY
  enum { VT_INPLACE_SCALAR_OPS(VT_ENUM) };
  at::Tensor& a = T(ah);
  const at::Scalar s = vt::scalar(value, is_integral);
  switch (op) {
    VT_INPLACE_SCALAR_OPS(VT_CASE_INPLACE)
    default: bad_op("in-place scalar", op);
  }
  VT_CATCH
}

VT_API int32_t vt_reduce(int32_t op, void* ah, const double* dims_in, int32_t n, int32_t keepdim_flag,
                         int32_t dtype, double p, double* out) {
  VT_TRY
  enum { VT_REDUCE_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const std::vector<int64_t> dim_values = vt::ints(dims_in, n);
  const at::IntArrayRef dims(dim_values);
  const std::vector<int64_t> every_dim = n == 0 ? all_dims(a) : dim_values;
  const at::IntArrayRef dims_all(every_dim);
  const bool keepdim = keepdim_flag != 0;
  const auto dt = vt::opt_dtype(dtype);
  at::Tensor result;
  switch (op) {
    VT_REDUCE_OPS(VT_CASE)
    default: bad_op("reduce", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_dim_op(int32_t op, void* ah, int32_t has_dim, int64_t dim, int32_t keepdim_flag, int32_t dtype,
                         double* out) {
  VT_TRY
  enum { VT_DIM_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const bool keepdim = keepdim_flag != 0;
  const auto dt = vt::opt_dtype(dtype);
  at::Tensor result;
  switch (op) {
    VT_DIM_OPS(VT_CASE)
    default: bad_op("dim", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_int_op(int32_t op, void* ah, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double* out) {
  VT_TRY
  enum { VT_INT_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  at::Tensor result;
  switch (op) {
    VT_INT_OPS(VT_CASE)
    default: bad_op("int", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_list_op(int32_t op, void* ah, const double* values, int32_t n, double* out) {
  VT_TRY
  enum { VT_LIST_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const std::vector<int64_t> list_values = vt::ints(values, n);
  const at::IntArrayRef list(list_values);
  at::Tensor result;
  switch (op) {
    VT_LIST_OPS(VT_CASE)
    default: bad_op("list", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_pair_op(int32_t op, void* ah, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double* out) {
  VT_TRY
  enum { VT_PAIR_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  std::tuple<at::Tensor, at::Tensor> result;
  switch (op) {
    VT_PAIR_OPS(VT_CASE)
    default: bad_op("pair", op);
  }
  out[0] = vt::wrap(std::move(std::get<0>(result)));
  out[1] = vt::wrap(std::move(std::get<1>(result)));
  VT_CATCH
}

VT_API int32_t vt_index_op(int32_t op, void* ah, int64_t dim, void* bh, void* ch, double value, int32_t is_integral,
                           double* out) {
  VT_TRY
  enum { VT_INDEX_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  const at::Tensor& b = T(bh);
  static const at::Tensor none;
  const at::Tensor& c = ch ? T(ch) : none;
  const at::Scalar s = vt::scalar(value, is_integral);
  at::Tensor result;
  switch (op) {
    VT_INDEX_OPS(VT_CASE)
    default: bad_op("index", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_index_inplace(int32_t op, void* ah, int64_t dim, void* bh, void* ch, double value,
                                int32_t is_integral) {
  VT_TRY
  enum { VT_INDEX_INPLACE_OPS(VT_ENUM) };
  at::Tensor& a = T(ah);
  const at::Tensor& b = T(bh);
  static const at::Tensor none;
  const at::Tensor& c = ch ? T(ch) : none;
  const at::Scalar s = vt::scalar(value, is_integral);
  switch (op) {
    VT_INDEX_INPLACE_OPS(VT_CASE_INPLACE)
    default: bad_op("in-place index", op);
  }
  VT_CATCH
}

VT_API int32_t vt_ternary(int32_t op, void* ah, void* bh, void* ch, double s1, double s2, double* out) {
  VT_TRY
  enum { VT_TERNARY_OPS(VT_ENUM) };
  const at::Tensor& a = T(ah);
  static const at::Tensor none;
  const at::Tensor& b = bh ? T(bh) : none;
  const at::Tensor& c = ch ? T(ch) : none;
  at::Tensor result;
  switch (op) {
    VT_TERNARY_OPS(VT_CASE)
    default: bad_op("ternary", op);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

VT_API int32_t vt_clamp(void* ah, int32_t has_min, double min, int32_t has_max, double max, double* out) {
  VT_TRY
  vt::optional<at::Scalar> lo, hi;
  if (has_min) lo = at::Scalar(min);
  if (has_max) hi = at::Scalar(max);
  out[0] = vt::wrap(at::clamp(T(ah), lo, hi));
  VT_CATCH
}

// op 0 = cat, 1 = stack.
VT_API int32_t vt_join(int32_t op, const double* handles, int32_t n, int64_t dim, double* out) {
  VT_TRY
  auto list = vt::tensors(handles, n);
  out[0] = vt::wrap(op == 0 ? at::cat(list, dim) : at::stack(list, dim));
  VT_CATCH
}

// Multi-output splits. op 0 = split(size), 1 = split_with_sizes(list), 2 = chunk(n),
// 3 = unbind. Writes out[0] = count, out[1..count] = handles; `capacity` bounds count.
VT_API int32_t vt_split(int32_t op, void* ah, const double* values, int32_t n, int64_t dim, int32_t capacity,
                        double* out) {
  VT_TRY
  const at::Tensor& a = T(ah);
  std::vector<at::Tensor> parts;
  switch (op) {
    case 0: parts = a.split(static_cast<int64_t>(values[0]), dim); break;
    case 1: parts = a.split_with_sizes(vt::ints(values, n), dim); break;
    case 2: parts = a.chunk(static_cast<int64_t>(values[0]), dim); break;
    case 3: parts = a.unbind(dim); break;
    default: bad_op("split", op);
  }
  TORCH_CHECK(static_cast<int64_t>(parts.size()) <= capacity, "split produced ", parts.size(),
              " parts, more than the ", capacity, " the caller can receive");
  out[0] = static_cast<double>(parts.size());
  for (size_t i = 0; i < parts.size(); i++) out[1 + i] = vt::wrap(std::move(parts[i]));
  VT_CATCH
}

VT_API int32_t vt_multinomial(void* ah, int64_t num_samples, int32_t replacement, void* generator, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::multinomial(T(ah), num_samples, replacement != 0, vt::gen(generator)));
  VT_CATCH
}

// Basic indexing with Python-style slices across several dims at once would take many
// FFI calls; this applies `n` (dim, start, end, step) slices in one crossing.
VT_API int32_t vt_slices(void* ah, const double* spec, int32_t n, double* out) {
  VT_TRY
  at::Tensor t = T(ah);
  for (int32_t i = 0; i < n; i++) {
    const double* s = spec + 4 * i;
    t = t.slice(static_cast<int64_t>(s[0]), static_cast<int64_t>(s[1]), static_cast<int64_t>(s[2]),
                static_cast<int64_t>(s[3]));
  }
  out[0] = vt::wrap(std::move(t));
  VT_CATCH
}
