// Autograd: requires_grad, backward, gradients, grad/inference modes and the node that
// implements activation checkpointing.
#include "shim.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <map>
#include <mutex>

using vt::T;

VT_API int32_t vt_requires_grad_(void* h, int32_t flag) {
  VT_TRY
  T(h).set_requires_grad(flag != 0);
  VT_CATCH
}

// out: [is_leaf, has_grad_fn, retains_grad]
VT_API int32_t vt_autograd_meta(void* h, double* out) {
  VT_TRY
  const at::Tensor& t = T(h);
  out[0] = t.is_leaf() ? 1 : 0;
  out[1] = t.grad_fn() ? 1 : 0;
  out[2] = t.retains_grad() ? 1 : 0;
  VT_CATCH
}

VT_API int32_t vt_retain_grad(void* h) {
  VT_TRY
  T(h).retain_grad();
  VT_CATCH
}

// out[0] = handle of .grad, or 0 when no gradient has been accumulated.
VT_API int32_t vt_grad(void* h, double* out) {
  VT_TRY
  const at::Tensor& g = T(h).grad();
  out[0] = g.defined() ? vt::wrap(g) : 0;
  VT_CATCH
}

// Sets .grad to `g`, or clears it (sets None) when g is null.
VT_API int32_t vt_set_grad(void* h, void* g) {
  VT_TRY
  T(h).mutable_grad() = g ? T(g) : at::Tensor();
  VT_CATCH
}

VT_API int32_t vt_backward(void* h, void* grad, int32_t retain_graph, int32_t create_graph) {
  VT_TRY
  T(h).backward(grad ? T(grad) : at::Tensor(), retain_graph != 0, create_graph != 0);
  VT_CATCH
}

// torch.autograd.backward over several roots at once.
VT_API int32_t vt_backward_many(const double* roots, const double* grads, int32_t n, int32_t retain_graph,
                                int32_t create_graph) {
  VT_TRY
  torch::autograd::variable_list r = vt::tensors(roots, n);
  torch::autograd::variable_list g;
  g.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; i++) g.push_back(grads[i] != 0 ? T(vt::unwrap_ptr(grads[i])) : at::Tensor());
  torch::autograd::backward(r, g, retain_graph != 0, create_graph != 0);
  VT_CATCH
}

// torch.autograd.grad: gradients of `outputs` w.r.t. `inputs`, written to out[0..n_in);
// 0 marks an input the outputs do not depend on (allow_unused semantics).
VT_API int32_t vt_autograd_grad(const double* outputs, const double* grad_outputs, int32_t n_out, const double* inputs,
                                int32_t n_in, int32_t retain_graph, int32_t create_graph, double* out) {
  VT_TRY
  torch::autograd::variable_list o = vt::tensors(outputs, n_out);
  torch::autograd::variable_list go;
  for (int32_t i = 0; i < n_out; i++)
    go.push_back(grad_outputs[i] != 0 ? T(vt::unwrap_ptr(grad_outputs[i])) : at::Tensor());
  torch::autograd::variable_list in = vt::tensors(inputs, n_in);
  auto grads = torch::autograd::grad(o, in, go, retain_graph != 0, create_graph != 0, /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); i++) out[i] = grads[i].defined() ? vt::wrap(grads[i]) : 0;
  VT_CATCH
}

VT_API int32_t vt_grad_enabled() {
  VT_TRY
  return c10::GradMode::is_enabled() ? 1 : 0;
  VT_CATCH_RETURN(0)
}

VT_API void vt_set_grad_enabled(int32_t flag) {
  VT_TRY
  c10::GradMode::set_enabled(flag != 0);
  VT_CATCH_VOID
}

// Inference mode is an RAII guard in C++; scopes in TypeScript are strictly nested
// (inferenceMode(fn) enters, runs fn, exits), so the guard lives on the heap between the
// enter and exit calls.
VT_API int32_t vt_inference_mode_enter(int32_t enabled, double* out) {
  VT_TRY
  auto* guard = new c10::InferenceMode(enabled != 0);
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(guard));
  VT_CATCH
}

VT_API void vt_inference_mode_exit(void* guard) {
  VT_TRY
  delete static_cast<c10::InferenceMode*>(guard);
  VT_CATCH_VOID
}

VT_API int32_t vt_is_inference_mode() {
  VT_TRY
  return c10::InferenceMode::is_enabled() ? 1 : 0;
  VT_CATCH_RETURN(0)
}

// A status entry like vt_is_pinned: a disposed tensor is an error, not a crash.
// out[0] = 1 when the tensor was created in inference mode.
VT_API int32_t vt_is_inference(void* h, double* out) {
  VT_TRY
  out[0] = T(h).is_inference() ? 1 : 0;
  VT_CATCH
}

// ---- activation checkpointing --------------------------------------------------------
//
// A checkpointed block runs its forward without recording a graph. Its output is then
// attached to a CheckpointNode that holds the block's inputs (its edges to them are
// invalid, so the engine never walks past it). When backward reaches that node it does
// not recompute anything itself (the block is TypeScript code,
// and libtorch may run CUDA backward work on its own threads, where JavaScript cannot be
// called); it stashes the incoming gradient together with the block's inputs and stops.
// The TypeScript side then pops every stashed entry, runs each block's backward (for a
// checkpoint: recompute with grad enabled and backpropagate), and continues backward from
// all the blocks' original inputs at once with the gradients it obtained, so a graph that
// several blocks read is walked once, with their gradients summed.

namespace {

struct StashEntry {
  at::Tensor grad;
  std::vector<at::Tensor> inputs;  // the block's original inputs (with their history)
  std::vector<at::Tensor> extras;  // saved RNG states, restored before the recompute
};

std::mutex stash_mutex;
std::map<int64_t, StashEntry> stash;
std::vector<int64_t> released;  // ids whose node was destroyed: TS may drop the closure

struct CheckpointNode : public torch::autograd::Node {
  int64_t id;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> extras;

  CheckpointNode(int64_t id_, std::vector<at::Tensor> inputs_, std::vector<at::Tensor> extras_)
      : id(id_), inputs(std::move(inputs_)), extras(std::move(extras_)) {}

  ~CheckpointNode() override {
    std::lock_guard<std::mutex> lock(stash_mutex);
    released.push_back(id);
  }

  std::string name() const override { return "vagen::CheckpointBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(stash_mutex);
    auto found = stash.find(id);
    if (found == stash.end()) {
      stash.emplace(id, StashEntry{grads[0], inputs, extras});
    } else if (grads[0].defined()) {
      found->second.grad = found->second.grad.defined() ? found->second.grad + grads[0] : grads[0];
    }
    // The edges are invalid, so these undefined gradients go nowhere; the TypeScript
    // driver carries the real ones into the inputs' graph later.
    return torch::autograd::variable_list(num_outputs());
  }
};

}  // namespace

// Attaches `y` (computed without grad) to a new CheckpointNode over `inputs`.
// out[0] = the output handle that carries the node as its grad_fn.
VT_API int32_t vt_checkpoint_attach(int64_t id, void* yh, const double* inputs, int32_t n_inputs, const double* extras,
                                    int32_t n_extras, double* out) {
  VT_TRY
  std::vector<at::Tensor> in = vt::tensors(inputs, n_inputs);
  std::vector<at::Tensor> ex = vt::tensors(extras, n_extras);
  at::Tensor y = T(yh);
  {
    // A block that returns a view or one of its inputs must not have that tensor's
    // history overwritten: give the node a fresh tensor instead.
    c10::NoGradGuard no_grad;
    if (y.requires_grad() || y.is_view()) y = y.clone();
  }
  bool any_requires_grad = false;
  for (const auto& t : in) any_requires_grad = any_requires_grad || t.requires_grad();
  if (any_requires_grad && c10::GradMode::is_enabled()) {
    auto node = std::shared_ptr<CheckpointNode>(new CheckpointNode(id, in, std::move(ex)), torch::autograd::deleteNode);
    // One invalid edge per input: the engine stops here instead of walking on into the
    // inputs' graph with undefined gradients, which would free that graph's saved tensors
    // before the TypeScript driver brings the real gradients (and would run it for nothing).
    node->set_next_edges(torch::autograd::edge_list(in.size()));
    torch::autograd::set_history(y, node);
  } else {
    std::lock_guard<std::mutex> lock(stash_mutex);
    released.push_back(id);  // nothing to recompute: the closure can go now
  }
  out[0] = vt::wrap(std::move(y));
  VT_CATCH
}

// Pops the pending entry with the highest id. out: [id (-1 when none), grad handle,
// n_inputs, n_extras, input handles..., extra handles...]. `capacity` bounds the handles.
VT_API int32_t vt_checkpoint_pop(int32_t capacity, double* out) {
  VT_TRY
  std::lock_guard<std::mutex> lock(stash_mutex);
  if (stash.empty()) {
    out[0] = -1;
    return 0;
  }
  auto last = std::prev(stash.end());
  StashEntry entry = std::move(last->second);
  const int64_t id = last->first;
  stash.erase(last);
  const size_t n = entry.inputs.size() + entry.extras.size();
  TORCH_CHECK(static_cast<int64_t>(n) <= capacity, "checkpoint has too many inputs (", n, ")");
  out[0] = static_cast<double>(id);
  out[1] = entry.grad.defined() ? vt::wrap(entry.grad) : 0;
  out[2] = static_cast<double>(entry.inputs.size());
  out[3] = static_cast<double>(entry.extras.size());
  size_t k = 4;
  for (auto& t : entry.inputs) out[k++] = vt::wrap(t);
  for (auto& t : entry.extras) out[k++] = vt::wrap(t);
  VT_CATCH
}

VT_API int64_t vt_checkpoint_pending() {
  VT_TRY
  std::lock_guard<std::mutex> lock(stash_mutex);
  return static_cast<int64_t>(stash.size());
  VT_CATCH_RETURN(-1)
}

// Drains the ids of destroyed checkpoint nodes into out[1..], out[0] = count.
VT_API int32_t vt_checkpoint_released(int32_t capacity, double* out) {
  VT_TRY
  std::lock_guard<std::mutex> lock(stash_mutex);
  const size_t n = std::min(released.size(), static_cast<size_t>(capacity));
  out[0] = static_cast<double>(n);
  for (size_t i = 0; i < n; i++) out[1 + i] = static_cast<double>(released[i]);
  released.erase(released.begin(), released.begin() + static_cast<std::ptrdiff_t>(n));
  VT_CATCH
}
