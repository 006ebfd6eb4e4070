// Optimizer steps over whole parameter lists in one FFI call: AdamW (libtorch's fused
// kernel where it has one, else the multi-tensor "foreach" kernels), SGD with momentum,
// and gradient-norm clipping.
#include "shim.h"

#include <cmath>
#include <map>
#include <tuple>

using vt::T;

namespace {

// The tensors one AdamW call updates together. `targets` are what the update writes: the
// parameter itself, or its f32 master copy, from which `params` are written back after it.
struct Group {
  std::vector<at::Tensor> targets, grads, exp_avgs, exp_avg_sqs, params, masters;
};

// The step count of a group, 1-based after the update.
using GroupKey = std::tuple<std::string, int, double>;

// Parameters without a gradient are skipped and keep their step count (PyTorch's rule).
// Fused kernels need every tensor of a call to share device and dtype, and the foreach
// path uses one bias correction per call, so parameters are grouped by device, dtype of
// what is updated and step count. A parameter with a master copy (masters[i] != 0) has its
// f32 master, moments and a f32 copy of its gradient updated, and is then written from the
// master. A master may live on another device than its parameter (optimizer offload: the
// state in host memory); the gradient is copied to it, and the parameter written back.
std::map<GroupKey, Group> group_params(const double* params, const double* masters, const double* m, const double* v,
                                       double* steps, int32_t n) {
  std::map<GroupKey, Group> groups;
  for (int32_t i = 0; i < n; i++) {
    const at::Tensor& p = T(vt::unwrap_ptr(params[i]));
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    const at::Tensor target = masters[i] != 0 ? T(vt::unwrap_ptr(masters[i])) : p;
    TORCH_CHECK(target.sizes() == p.sizes(), "AdamW: master copy of shape ", target.sizes(), " for a parameter of shape ",
                p.sizes());
    steps[i] += 1;
    Group& grp = groups[{target.device().str(), static_cast<int>(target.scalar_type()), steps[i]}];
    grp.targets.push_back(target);
    // an offloaded state lives in host memory: the gradient goes there too (and is cast)
    const bool same = g.scalar_type() == target.scalar_type() && g.device() == target.device();
    grp.grads.push_back(same ? g : g.to(target.device(), target.scalar_type()));
    grp.exp_avgs.push_back(T(vt::unwrap_ptr(m[i])));
    grp.exp_avg_sqs.push_back(T(vt::unwrap_ptr(v[i])));
    if (masters[i] != 0) {
      grp.params.push_back(p);
      grp.masters.push_back(target);
    }
  }
  return groups;
}

bool fused_adamw_available(const at::Tensor& p) {
#if VT_TORCH_AT_LEAST(2, 4)
  return p.is_cuda() || p.is_cpu();
#elif VT_TORCH_AT_LEAST(2, 1)
  return p.is_cuda();
#else
  (void)p;
  return false;
#endif
}

void adamw_foreach(Group& g, double lr, double beta1, double beta2, double eps, double wd, double step) {
  if (wd != 0) at::_foreach_mul_(g.targets, 1 - lr * wd);
  at::_foreach_mul_(g.exp_avgs, beta1);
  at::_foreach_add_(g.exp_avgs, g.grads, 1 - beta1);
  at::_foreach_mul_(g.exp_avg_sqs, beta2);
  at::_foreach_addcmul_(g.exp_avg_sqs, g.grads, g.grads, 1 - beta2);
  const double bias1 = 1 - std::pow(beta1, step);
  const double bias2 = 1 - std::pow(beta2, step);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(g.exp_avg_sqs);
  at::_foreach_div_(denom, std::sqrt(bias2));
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(g.targets, g.exp_avgs, denom, -lr / bias1);
}

}  // namespace

VT_API int32_t vt_has_fused_adamw() {
  VT_TRY
  return VT_TORCH_AT_LEAST(2, 1) ? 1 : 0;
  VT_CATCH_RETURN(0)
}

// One AdamW step (decoupled weight decay, PyTorch's torch.optim.AdamW semantics).
// masters[i]: 0, or an f32 master copy of params[i] that is updated instead and written
// back into it. steps[i]: parameter i's step count, incremented here when it has a
// gradient (PyTorch's per-parameter state["step"]). mode: 0 fused when available, 1 always
// foreach. out[0] = number of tensor groups that used the fused kernel.
VT_API int32_t vt_adamw_step(const double* params, const double* masters, const double* exp_avgs,
                             const double* exp_avg_sqs, double* steps, int32_t n, double lr, double beta1, double beta2,
                             double eps, double weight_decay, int32_t mode, double* out) {
  VT_TRY
  c10::NoGradGuard no_grad;
  auto groups = group_params(params, masters, exp_avgs, exp_avg_sqs, steps, n);
  int fused_groups = 0;
  for (auto& [key, g] : groups) {
    const double step = std::get<2>(key);
    bool fused = false;
    if (mode == 0 && fused_adamw_available(g.targets[0])) {
#if VT_TORCH_AT_LEAST(2, 1)
      // The kernel only reads the step count, so one 0-d tensor serves the whole group.
      at::Tensor step_t = at::full({}, step, g.targets[0].options().dtype(at::kFloat));
      std::vector<at::Tensor> step_list(g.targets.size(), step_t);
      at::_fused_adamw_(g.targets, g.grads, g.exp_avgs, g.exp_avg_sqs, {}, step_list, lr, beta1, beta2, weight_decay,
                        eps, /*amsgrad=*/false, /*maximize=*/false);
      fused = true;
      fused_groups++;
#endif
    }
    if (!fused) adamw_foreach(g, lr, beta1, beta2, eps, weight_decay, step);
    for (size_t i = 0; i < g.params.size(); i++) g.params[i].copy_(g.masters[i]);
  }
  out[0] = fused_groups;
  VT_CATCH
}

// SGD with optional momentum / Nesterov / weight decay (torch.optim.SGD semantics).
// `bufs` holds a momentum buffer per parameter (ignored when momentum is 0); `first`
// marks the first step, where PyTorch initialises the buffer with the gradient.
VT_API int32_t vt_sgd_step(const double* params, const double* bufs, int32_t n, double lr, double momentum,
                           double dampening, double weight_decay, int32_t nesterov, int32_t first) {
  VT_TRY
  c10::NoGradGuard no_grad;
  for (int32_t i = 0; i < n; i++) {
    at::Tensor& p = T(vt::unwrap_ptr(params[i]));
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    if (weight_decay != 0) g = g.add(p, weight_decay);
    if (momentum != 0) {
      at::Tensor& buf = T(vt::unwrap_ptr(bufs[i]));
      if (first) buf.copy_(g);
      else buf.mul_(momentum).add_(g, 1 - dampening);
      g = nesterov ? g.add(buf, momentum) : buf;
    }
    p.add_(g, -lr);
  }
  VT_CATCH
}

// Scales all gradients so that their joint p-norm is at most max_norm (PyTorch's
// clip_grad_norm_). out[0] = the total norm before clipping, as a 0-d float32 tensor
// on the first gradient's device (no host sync).
VT_API int32_t vt_clip_grad_norm(const double* params, int32_t n, double max_norm, double norm_type, int32_t,
                                 double* out) {
  VT_TRY
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (int32_t i = 0; i < n; i++) {
    const at::Tensor& g = T(vt::unwrap_ptr(params[i])).grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) {
    out[0] = vt::wrap(at::zeros({}, at::kFloat));
    return 0;
  }
  const at::Device dev = grads[0].device();
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g, norm_type, {}, false, at::kFloat).to(dev));
  at::Tensor total = std::isinf(norm_type) ? at::stack(norms).max() : at::linalg_vector_norm(at::stack(norms), norm_type);
  at::Tensor coef = at::clamp_max(max_norm / (total + 1e-6), 1.0);
  for (auto& g : grads) g.mul_(coef.to(g.device(), g.scalar_type()));
  out[0] = vt::wrap(std::move(total));
  VT_CATCH
}
