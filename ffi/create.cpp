// Tensor factories, random number generators and seeding.
#include "shim.h"

#include <ATen/CPUGeneratorImpl.h>
#ifdef VAGEN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

using vt::T;

enum FillKind : int32_t { FILL_ZEROS = 0, FILL_ONES = 1, FILL_EMPTY = 2, FILL_VALUE = 3 };

VT_API int32_t vt_fill(int32_t kind, const double* shape, int32_t ndim, double value, int32_t is_integral,
                       int32_t dtype, int32_t device_type, int32_t device_index, double* out) {
  VT_TRY
  auto sizes = vt::ints(shape, ndim);
  auto opts = vt::options(dtype, device_type, device_index);
  at::Tensor t;
  switch (kind) {
    case FILL_ZEROS: t = at::zeros(sizes, opts); break;
    case FILL_ONES: t = at::ones(sizes, opts); break;
    case FILL_EMPTY: t = at::empty(sizes, opts); break;
    case FILL_VALUE: t = at::full(sizes, vt::scalar(value, is_integral), opts); break;
    default: throw std::invalid_argument("unknown fill kind");
  }
  out[0] = vt::wrap(std::move(t));
  VT_CATCH
}

// zeros_like / ones_like / empty_like / full_like; dtype -1 keeps the source dtype.
VT_API int32_t vt_fill_like(int32_t kind, void* h, double value, int32_t is_integral, int32_t dtype, double* out) {
  VT_TRY
  const at::Tensor& src = T(h);
  auto opts = src.options().dtype(dtype < 0 ? src.scalar_type() : vt::dtype(dtype));
  at::Tensor t;
  switch (kind) {
    case FILL_ZEROS: t = at::zeros_like(src, opts); break;
    case FILL_ONES: t = at::ones_like(src, opts); break;
    case FILL_EMPTY: t = at::empty_like(src, opts); break;
    case FILL_VALUE: t = at::full_like(src, vt::scalar(value, is_integral), opts); break;
    default: throw std::invalid_argument("unknown fill kind");
  }
  out[0] = vt::wrap(std::move(t));
  VT_CATCH
}

VT_API int32_t vt_arange(double start, double end, double step, int32_t dtype, int32_t device_type,
                         int32_t device_index, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::arange(start, end, step, vt::options(dtype, device_type, device_index)));
  VT_CATCH
}

VT_API int32_t vt_linspace(double start, double end, int64_t steps, int32_t dtype, int32_t device_type,
                           int32_t device_index, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::linspace(start, end, steps, vt::options(dtype, device_type, device_index)));
  VT_CATCH
}

VT_API int32_t vt_eye(int64_t n, int64_t m, int32_t dtype, int32_t device_type, int32_t device_index, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::eye(n, m, vt::options(dtype, device_type, device_index)));
  VT_CATCH
}

enum RandomKind : int32_t { RAND_UNIFORM = 0, RAND_NORMAL = 1, RAND_INT = 2 };

// rand (uniform [0,1)), randn (standard normal) and randint ([low, high)).
VT_API int32_t vt_random(int32_t kind, const double* shape, int32_t ndim, double low, double high, void* generator,
                         int32_t dtype, int32_t device_type, int32_t device_index, double* out) {
  VT_TRY
  auto sizes = vt::ints(shape, ndim);
  auto opts = vt::options(dtype, device_type, device_index);
  auto g = vt::gen(generator);
  at::Tensor t;
  switch (kind) {
    case RAND_UNIFORM: t = at::rand(sizes, g, opts); break;
    case RAND_NORMAL: t = at::randn(sizes, g, opts); break;
    case RAND_INT:
      t = at::randint(static_cast<int64_t>(low), static_cast<int64_t>(high), sizes, g, opts);
      break;
    default: throw std::invalid_argument("unknown random kind");
  }
  out[0] = vt::wrap(std::move(t));
  VT_CATCH
}

// In-place initialisers used by weight initialisation: uniform_(a, b) and normal_(mean, std).
VT_API int32_t vt_random_(int32_t kind, void* h, double a, double b, void* generator) {
  VT_TRY
  c10::NoGradGuard no_grad;
  auto g = vt::gen(generator);
  if (kind == RAND_UNIFORM) T(h).uniform_(a, b, g);
  else if (kind == RAND_NORMAL) T(h).normal_(a, b, g);
  else throw std::invalid_argument("unknown in-place random kind");
  VT_CATCH
}

VT_API int32_t vt_scalar_tensor(double value, int32_t is_integral, int32_t dtype, int32_t device_type,
                                int32_t device_index, double* out) {
  VT_TRY
  out[0] = vt::wrap(at::scalar_tensor(vt::scalar(value, is_integral), vt::options(dtype, device_type, device_index)));
  VT_CATCH
}

// ---- generators ---------------------------------------------------------------------

VT_API int32_t vt_generator_new(int32_t device_type, int32_t device_index, int64_t seed, double* out) {
  VT_TRY
  at::Generator g;
  if (device_type == 0) {
    g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  } else {
#ifdef VAGEN_WITH_CUDA
    c10::DeviceIndex index = device_index < 0 ? c10::cuda::current_device() : static_cast<c10::DeviceIndex>(device_index);
    g = at::make_generator<at::CUDAGeneratorImpl>(index);
    g.set_current_seed(static_cast<uint64_t>(seed));
#else
    (void)device_index;
    throw std::invalid_argument("CUDA generator requested but this shim was built without CUDA");
#endif
  }
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(new at::Generator(std::move(g))));
  VT_CATCH
}

VT_API void vt_generator_free(void* g) {
  VT_TRY
  delete static_cast<at::Generator*>(g);
  VT_CATCH_VOID
}

VT_API int32_t vt_generator_seed(void* g, int64_t seed) {
  VT_TRY
  auto* gen = static_cast<at::Generator*>(g);
  std::lock_guard<std::mutex> lock(gen->mutex());
  gen->set_current_seed(static_cast<uint64_t>(seed));
  VT_CATCH
}

// Generator state as a CPU uint8 tensor, for save/restore (e.g. checkpoint recompute).
VT_API int32_t vt_generator_get_state(void* g, double* out) {
  VT_TRY
  auto* gen = static_cast<at::Generator*>(g);
  std::lock_guard<std::mutex> lock(gen->mutex());
  out[0] = vt::wrap(gen->get_state());
  VT_CATCH
}

VT_API int32_t vt_generator_set_state(void* g, void* state) {
  VT_TRY
  auto* gen = static_cast<at::Generator*>(g);
  std::lock_guard<std::mutex> lock(gen->mutex());
  gen->set_state(T(state));
  VT_CATCH
}

// Seeds the default CPU generator and, when present, every CUDA device's generator.
VT_API int32_t vt_manual_seed(int64_t seed) {
  VT_TRY
  at::manual_seed(static_cast<uint64_t>(seed));
  VT_CATCH
}

// The default generator of a device (device_type 0 cpu, 1 cuda).
static at::Generator default_generator(int32_t device_type, int32_t device_index) {
  if (device_type == 0) return at::detail::getDefaultCPUGenerator();
#ifdef VAGEN_WITH_CUDA
  return at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device_index));
#else
  (void)device_index;
  throw std::invalid_argument("CUDA generator requested but this shim was built without CUDA");
#endif
}

// State of a device's default generator.
VT_API int32_t vt_default_rng_state(int32_t device_type, int32_t device_index, double* out) {
  VT_TRY
  at::Generator g = default_generator(device_type, device_index);
  std::lock_guard<std::mutex> lock(g.mutex());
  out[0] = vt::wrap(g.get_state());
  VT_CATCH
}

VT_API int32_t vt_set_default_rng_state(int32_t device_type, int32_t device_index, void* state) {
  VT_TRY
  at::Generator g = default_generator(device_type, device_index);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(T(state));
  VT_CATCH
}
