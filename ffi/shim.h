// The C ABI between vagen's TypeScript tensor library (src/torch) and libtorch.
//
// Conventions shared by every entry point (see src/torch/native.ts for the other side):
//   * Every entry returns an int32 status: 0 on success, 1 on failure. On failure the
//     message is fetched with one extra call, vt_last_error(), so the happy path costs a
//     single FFI crossing per op. No C++ exception ever crosses into Bun (it would abort
//     the process): a guard wraps every body (see "errors" below), and the binding
//     generator (scripts/shim-bindings.ts) refuses an entry point without one.
//   * src/torch/native-symbols.ts and src/torch/opcodes.ts are generated from the VT_API
//     functions and the op lists of ffi/ops.cpp; every exported function is written as
//     `VT_API <type> vt_name(<type> <name>, ...) {` outside any #if, with int32_t,
//     int64_t, double, pointer or const char* types.
//   * Tensors travel as heap `at::Tensor*` handles. Results are written to a caller-owned
//     `double* out` array: a pointer is stored as a double because user-space addresses
//     on x86-64 and arm64 fit in 48 bits, so the TypeScript side reads handles from a
//     Float64Array without BigInt conversions. Integer lists (shapes, dims) arrive the
//     same way, as `const double*` plus a length.
//   * dtypes and devices use the small codes below, not ATen's enum values, so the ABI
//     does not depend on the libtorch version.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/version.h>

#include <atomic>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#define VT_API extern "C" __attribute__((visibility("default")))

// The version of this ABI (every VT_API signature and every op list of ops.cpp). Bump it
// whenever one changes: src/torch refuses a shim whose vt_abi_version() differs from the
// version its bindings were generated for, and the generator refuses a changed ABI that
// kept the old number.
#define VT_ABI_VERSION 5

#define VT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace vt {

// libtorch 2.x spells optionals std::optional (c10::optional became an alias and is being
// removed); 1.13 has its own c10::optional. One name for both.
#if VT_TORCH_AT_LEAST(2, 3)
template <class T>
using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;
#else
template <class T>
using optional = c10::optional<T>;
inline constexpr c10::nullopt_t nullopt = c10::nullopt;
#endif

// ---- errors -------------------------------------------------------------------------
void set_error(const char* message);

// Guards, one around every entry point's body:
//   status entries  VT_TRY ... VT_CATCH                  0, or 1 with vt_last_error() set
//   value entries   VT_TRY ... VT_CATCH_RETURN(fallback)  fallback with vt_last_error() set
//   void entries    VT_TRY ... VT_CATCH_VOID              returns with vt_last_error() set
// A try block costs nothing on the path that does not throw.
#define VT_TRY try {
#define VT_CATCH_WITH(on_error)                                \
  }                                                            \
  catch (const c10::Error& e) {                                \
    ::vt::set_error(e.what_without_backtrace());               \
    on_error;                                                  \
  }                                                            \
  catch (const std::exception& e) {                            \
    ::vt::set_error(e.what());                                 \
    on_error;                                                  \
  }                                                            \
  catch (...) {                                                \
    ::vt::set_error("unknown C++ exception inside libtorch"); \
    on_error;                                                  \
  }
#define VT_CATCH VT_CATCH_WITH(return 1) return 0;
#define VT_CATCH_RETURN(fallback) VT_CATCH_WITH(return (fallback))
#define VT_CATCH_VOID VT_CATCH_WITH(return)

// ---- handles ------------------------------------------------------------------------
extern std::atomic<int64_t> live_handles;

// Every required tensor argument goes through T(): a null handle (a disposed tensor on
// the TypeScript side) becomes an error instead of a crash.
inline at::Tensor& T(void* handle) {
  if (handle == nullptr) throw std::invalid_argument("use of a disposed tensor");
  return *static_cast<at::Tensor*>(handle);
}

// Optional tensor argument: a null handle means "not given".
inline vt::optional<at::Tensor> opt(void* handle) {
  if (handle == nullptr) return vt::nullopt;
  return T(handle);
}

inline double wrap(at::Tensor t) {
  live_handles.fetch_add(1, std::memory_order_relaxed);
  return static_cast<double>(reinterpret_cast<uintptr_t>(new at::Tensor(std::move(t))));
}

inline void* unwrap_ptr(double encoded) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(encoded));
}

// ---- argument decoding --------------------------------------------------------------
inline std::vector<int64_t> ints(const double* values, int32_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; i++) v[i] = static_cast<int64_t>(values[i]);
  return v;
}

inline std::vector<at::Tensor> tensors(const double* handles, int32_t n) {
  std::vector<at::Tensor> v;
  v.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; i++) v.push_back(T(unwrap_ptr(handles[i])));
  return v;
}

// A JS number becomes an integral Scalar when it has no fraction, so that
// `intTensor + 2` stays integral while `floatTensor + 2` stays floating (PyTorch's rule).
inline at::Scalar scalar(double value, int32_t is_integral) {
  if (is_integral) return at::Scalar(static_cast<int64_t>(value));
  return at::Scalar(value);
}

// dtype codes: 0 f32, 1 f16, 2 bf16, 3 f64, 4 i64, 5 i32, 6 u8, 7 bool, 8 i8, 9 i16.
at::ScalarType dtype(int32_t code);
int32_t dtype_code(at::ScalarType type);
inline vt::optional<at::ScalarType> opt_dtype(int32_t code) {
  if (code < 0) return vt::nullopt;
  return dtype(code);
}

// device codes: type 0 cpu, 1 cuda; index -1 means "the current one".
at::Device device(int32_t type, int32_t index);

inline at::TensorOptions options(int32_t dtype_code_, int32_t device_type, int32_t device_index) {
  return at::TensorOptions().dtype(dtype(dtype_code_)).device(device(device_type, device_index));
}

// Generator handle: null means the default generator of the device.
inline vt::optional<at::Generator> gen(void* handle) {
  if (handle == nullptr) return vt::nullopt;
  return *static_cast<at::Generator*>(handle);
}

}  // namespace vt
