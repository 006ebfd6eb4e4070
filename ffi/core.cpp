// Handles, errors, metadata, dtype/device conversion and host <-> tensor copies.
#include "shim.h"

#include <ATen/Parallel.h>

#include <cstring>

namespace vt {

static thread_local std::string last_error;
std::atomic<int64_t> live_handles{0};

void set_error(const char* message) { last_error = message ? message : "(no message)"; }

at::ScalarType dtype(int32_t code) {
  switch (code) {
    case 0: return at::kFloat;
    case 1: return at::kHalf;
    case 2: return at::kBFloat16;
    case 3: return at::kDouble;
    case 4: return at::kLong;
    case 5: return at::kInt;
    case 6: return at::kByte;
    case 7: return at::kBool;
    case 8: return at::kChar;
    case 9: return at::kShort;
  }
  throw std::invalid_argument("unknown dtype code " + std::to_string(code));
}

int32_t dtype_code(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    case at::kDouble: return 3;
    case at::kLong: return 4;
    case at::kInt: return 5;
    case at::kByte: return 6;
    case at::kBool: return 7;
    case at::kChar: return 8;
    case at::kShort: return 9;
    default: return -1;
  }
}

at::Device device(int32_t type, int32_t index) {
  switch (type) {
    case 0: return at::Device(at::kCPU);
    case 1: return index < 0 ? at::Device(at::kCUDA) : at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw std::invalid_argument("unknown device type code " + std::to_string(type));
}

}  // namespace vt

using vt::T;

VT_API const char* vt_last_error() {
  VT_TRY
  return vt::last_error.c_str();
  VT_CATCH_RETURN("")
}

VT_API const char* vt_torch_version() {
  VT_TRY
  return TORCH_VERSION;
  VT_CATCH_RETURN("")
}

// Checked first at load, before any other symbol is looked up (see VT_ABI_VERSION).
VT_API int32_t vt_abi_version() {
  VT_TRY
  return VT_ABI_VERSION;
  VT_CATCH_RETURN(0)
}

VT_API int32_t vt_has_cuda_build() {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  return 1;
#else
  return 0;
#endif
  VT_CATCH_RETURN(0)
}

VT_API int64_t vt_live_handles() {
  VT_TRY
  return vt::live_handles.load(std::memory_order_relaxed);
  VT_CATCH_RETURN(-1)
}

VT_API int32_t vt_num_threads() {
  VT_TRY
  return at::get_num_threads();
  VT_CATCH_RETURN(-1)
}

// A status entry: libtorch refuses a thread count below 1.
VT_API int32_t vt_set_num_threads(int32_t n) {
  VT_TRY
  at::set_num_threads(n);
  VT_CATCH
}

// Idempotence is enforced on the TypeScript side (it zeroes the handle after freeing);
// null is accepted here so a double dispose can never reach `delete` twice.
VT_API void vt_free(void* handle) {
  VT_TRY
  if (handle == nullptr) return;
  vt::live_handles.fetch_sub(1, std::memory_order_relaxed);
  delete static_cast<at::Tensor*>(handle);
  VT_CATCH_VOID
}

// out: [ndim, dtype, device type, device index, requires_grad, size0, size1, ...]
VT_API int32_t vt_meta(void* h, double* out) {
  VT_TRY
  const at::Tensor& t = T(h);
  if (!t.defined()) throw std::invalid_argument("tensor is undefined");
  const auto sizes = t.sizes();
  out[0] = static_cast<double>(sizes.size());
  out[1] = vt::dtype_code(t.scalar_type());
  out[2] = t.is_cuda() ? 1 : (t.is_cpu() ? 0 : 2);
  out[3] = t.is_cuda() ? t.device().index() : -1;
  out[4] = t.requires_grad() ? 1 : 0;
  for (size_t i = 0; i < sizes.size(); i++) out[5 + i] = static_cast<double>(sizes[i]);
  VT_CATCH
}

// out: [numel, element size, is_contiguous, storage offset, stride0, stride1, ...]
VT_API int32_t vt_layout(void* h, double* out) {
  VT_TRY
  const at::Tensor& t = T(h);
  out[0] = static_cast<double>(t.numel());
  out[1] = static_cast<double>(t.element_size());
  out[2] = t.is_contiguous() ? 1 : 0;
  out[3] = static_cast<double>(t.storage_offset());
  const auto strides = t.strides();
  for (size_t i = 0; i < strides.size(); i++) out[4 + i] = static_cast<double>(strides[i]);
  VT_CATCH
}

VT_API int32_t vt_item(void* h, double* out) {
  VT_TRY
  out[0] = T(h).item<double>();
  VT_CATCH
}

// Creates a tensor owned by libtorch from host memory. The bytes are read once: either
// copied straight onto `device` (converting to `dtype` on the way) or, when nothing needs
// converting, cloned on the CPU. The caller's memory is never retained.
VT_API int32_t vt_from_host(const void* data, int32_t src_dtype, const double* shape, int32_t ndim,
                            int32_t dtype, int32_t device_type, int32_t device_index, double* out) {
  VT_TRY
  auto sizes = vt::ints(shape, ndim);
  at::Tensor view = at::from_blob(const_cast<void*>(data), sizes, at::TensorOptions().dtype(vt::dtype(src_dtype)));
  at::Device target = vt::device(device_type, device_index);
  at::ScalarType target_dtype = dtype < 0 ? view.scalar_type() : vt::dtype(dtype);
  at::Tensor result;
  if (target.is_cpu()) {
    result = target_dtype == view.scalar_type() ? view.clone() : view.to(target_dtype);
  } else {
    result = view.to(target, target_dtype, /*non_blocking=*/false, /*copy=*/true);
  }
  out[0] = vt::wrap(std::move(result));
  VT_CATCH
}

// Copies a tensor (any device, layout or dtype) into host memory laid out as a contiguous
// array of `dst_dtype`. One copy: libtorch writes straight into the caller's buffer.
VT_API int32_t vt_to_host(void* h, void* dst, int32_t dst_dtype, int64_t capacity_bytes) {
  VT_TRY
  const at::Tensor& src = T(h);
  auto type = vt::dtype(dst_dtype);
  int64_t need = src.numel() * static_cast<int64_t>(c10::elementSize(type));
  if (need > capacity_bytes) throw std::invalid_argument("host buffer too small for tensor copy");
  at::Tensor view = at::from_blob(dst, src.sizes(), at::TensorOptions().dtype(type));
  c10::NoGradGuard no_grad;
  view.copy_(src);
  VT_CATCH
}

// Address of the first element of a CPU tensor (for zero-copy views such as
// safetensors writing). Fails for non-CPU or non-contiguous tensors.
VT_API int32_t vt_data_ptr(void* h, double* out) {
  VT_TRY
  const at::Tensor& t = T(h);
  TORCH_CHECK(t.is_cpu(), "data pointer requested for a tensor on ", t.device());
  TORCH_CHECK(t.is_contiguous(), "data pointer requested for a non-contiguous tensor");
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(t.data_ptr()));
  out[1] = static_cast<double>(t.numel() * static_cast<int64_t>(t.element_size()));
  VT_CATCH
}

// to(dtype?, device?): dtype -1 keeps the dtype, device_type -1 keeps the device.
VT_API int32_t vt_to(void* h, int32_t dtype, int32_t device_type, int32_t device_index, int32_t non_blocking,
                     int32_t copy, double* out) {
  VT_TRY
  const at::Tensor& t = T(h);
  at::ScalarType type = dtype < 0 ? t.scalar_type() : vt::dtype(dtype);
  at::Device dev = device_type < 0 ? t.device() : vt::device(device_type, device_index);
  out[0] = vt::wrap(t.to(dev, type, non_blocking != 0, copy != 0));
  VT_CATCH
}

// A copy in page-locked host memory (CUDA builds), so host-to-device copies from it can
// run asynchronously; pinned blocks come from libtorch's caching host allocator.
VT_API int32_t vt_pin_memory(void* h, double* out) {
  VT_TRY
  TORCH_CHECK(at::globalContext().hasCUDA(), "pinMemory: page-locked memory needs a CUDA build of libtorch and a GPU");
  out[0] = vt::wrap(T(h).pin_memory());
  VT_CATCH
}

VT_API int32_t vt_is_pinned(void* h, double* out) {
  VT_TRY
  out[0] = T(h).is_pinned() ? 1 : 0;
  VT_CATCH
}

// A second handle to the same tensor (same storage, same autograd identity).
VT_API int32_t vt_shallow_clone(void* h, double* out) {
  VT_TRY
  out[0] = vt::wrap(T(h));
  VT_CATCH
}

VT_API int32_t vt_same_storage(void* a, void* b, double* out) {
  VT_TRY
  out[0] = T(a).is_alias_of(T(b)) ? 1 : 0;
  VT_CATCH
}
