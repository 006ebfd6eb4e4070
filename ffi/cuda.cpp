// CUDA runtime services: devices, synchronisation, caching-allocator statistics,
// streams, events (for timing) and CUDA graphs. Everything that needs CUDA headers sits
// under VAGEN_WITH_CUDA (defined by build.ts when the libtorch it finds has CUDA); a
// CPU-only shim still exports every entry, reporting zero devices or a clear error.
#include "shim.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#ifdef VAGEN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstring>
#include <mutex>

#ifdef VAGEN_WITH_CUDA
#include <dlfcn.h>

namespace {
// libtorch initialises CUDA (and the caching allocator's per-device state) lazily, on
// the first CUDA tensor. Statistics calls before that fail with "Invalid device
// argument", so they create one tiny tensor first.
void ensure_cuda_initialized() {
  static std::once_flag once;
  std::call_once(once, [] { (void)at::empty({1}, at::TensorOptions().device(at::kCUDA)); });
}
}  // namespace
#endif

#ifndef VAGEN_WITH_CUDA
#define VT_NO_CUDA() throw std::runtime_error("this build of vagen's libtorch shim has no CUDA support")
#endif

// 0 when CUDA is missing or cannot be queried (the reason is left in vt_last_error).
VT_API int32_t vt_cuda_device_count() {
  VT_TRY
  return static_cast<int32_t>(at::detail::getCUDAHooks().getNumGPUs());
  VT_CATCH_RETURN(0)
}

// out: [total memory bytes, major, minor, multiprocessors]; name copied into name_buf.
VT_API int32_t vt_cuda_properties(int32_t device, double* out, char* name_buf, int32_t name_cap) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
  out[0] = static_cast<double>(prop->totalGlobalMem);
  out[1] = prop->major;
  out[2] = prop->minor;
  out[3] = prop->multiProcessorCount;
  std::strncpy(name_buf, prop->name, static_cast<size_t>(name_cap) - 1);
  name_buf[name_cap - 1] = 0;
#else
  (void)device, (void)out, (void)name_buf, (void)name_cap;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

// device < 0: the current device.
VT_API int32_t vt_cuda_synchronize(int32_t device) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  if (device < 0) c10::cuda::device_synchronize();
  else {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    c10::cuda::device_synchronize();
  }
#else
  (void)device;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

// out: [allocated, reserved, peak allocated, peak reserved, alloc retries, ooms] in bytes.
VT_API int32_t vt_cuda_memory_stats(int32_t device, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  ensure_cuda_initialized();
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  // Index 0 of each stat array is the aggregate over small and large pools.
  out[0] = static_cast<double>(stats.allocated_bytes[0].current);
  out[1] = static_cast<double>(stats.reserved_bytes[0].current);
  out[2] = static_cast<double>(stats.allocated_bytes[0].peak);
  out[3] = static_cast<double>(stats.reserved_bytes[0].peak);
  out[4] = static_cast<double>(stats.num_alloc_retries);
  out[5] = static_cast<double>(stats.num_ooms);
#else
  (void)device, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_empty_cache() {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  ensure_cuda_initialized();
  c10::cuda::CUDACachingAllocator::emptyCache();
#else
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_reset_peak(int32_t device) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  ensure_cuda_initialized();
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
#else
  (void)device;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_manual_seed_all(int64_t seed) {
  VT_TRY
  at::manual_seed(static_cast<uint64_t>(seed));  // seeds the CPU and every CUDA device
  VT_CATCH
}

// ---- streams ------------------------------------------------------------------------

VT_API int32_t vt_cuda_stream_new(int32_t device, int32_t high_priority, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto s = at::cuda::getStreamFromPool(high_priority != 0, static_cast<c10::DeviceIndex>(device));
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(new c10::cuda::CUDAStream(s)));
#else
  (void)device, (void)high_priority, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_stream_current(int32_t device, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto s = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(new c10::cuda::CUDAStream(s)));
#else
  (void)device, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_stream_set_current(void* stream) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  at::cuda::setCurrentCUDAStream(*static_cast<c10::cuda::CUDAStream*>(stream));
#else
  (void)stream;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_stream_synchronize(void* stream) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  static_cast<c10::cuda::CUDAStream*>(stream)->synchronize();
#else
  (void)stream;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API void vt_cuda_stream_free(void* stream) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  delete static_cast<c10::cuda::CUDAStream*>(stream);
#else
  (void)stream;
#endif
  VT_CATCH_VOID
}

// ---- events -------------------------------------------------------------------------

VT_API int32_t vt_cuda_event_new(int32_t enable_timing, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto* e = new at::cuda::CUDAEvent(enable_timing ? cudaEventDefault : cudaEventDisableTiming);
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(e));
#else
  (void)enable_timing, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

// Records on `stream`, or on the current stream when stream is null.
VT_API int32_t vt_cuda_event_record(void* event, void* stream) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto* e = static_cast<at::cuda::CUDAEvent*>(event);
  if (stream) e->record(*static_cast<c10::cuda::CUDAStream*>(stream));
  else e->record();
#else
  (void)event, (void)stream;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_event_synchronize(void* event) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  static_cast<at::cuda::CUDAEvent*>(event)->synchronize();
#else
  (void)event;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

// out[0] = milliseconds from `start` to `end` (both recorded, end completed).
VT_API int32_t vt_cuda_event_elapsed(void* start, void* end, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  out[0] = static_cast<at::cuda::CUDAEvent*>(start)->elapsed_time(*static_cast<at::cuda::CUDAEvent*>(end));
#else
  (void)start, (void)end, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_event_query(void* event, double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  out[0] = static_cast<at::cuda::CUDAEvent*>(event)->query() ? 1 : 0;
#else
  (void)event, (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API void vt_cuda_event_free(void* event) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  delete static_cast<at::cuda::CUDAEvent*>(event);
#else
  (void)event;
#endif
  VT_CATCH_VOID
}

// ---- CUDA graphs ----------------------------------------------------------------------
//
// Capture must happen on a side stream. begin() switches the current stream to a pool
// stream and starts capturing; end() stops capturing and restores the previous stream.
// The TypeScript side runs the captured work in between.

#ifdef VAGEN_WITH_CUDA
namespace {
struct Graph {
  at::cuda::CUDAGraph graph;
  vt::optional<c10::cuda::CUDAStream> previous;
};
}  // namespace
#endif

VT_API int32_t vt_cuda_graph_new(double* out) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(new Graph()));
#else
  (void)out;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

// pool: another graph whose memory pool this capture shares, or null.
VT_API int32_t vt_cuda_graph_begin(void* graph, void* share_pool_with) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto* g = static_cast<Graph*>(graph);
  g->previous = at::cuda::getCurrentCUDAStream();
  auto side = at::cuda::getStreamFromPool();
  // Work queued on the previous stream must be visible to the captured stream.
  side.synchronize();
  g->previous->synchronize();
  at::cuda::setCurrentCUDAStream(side);
  try {
    if (share_pool_with) g->graph.capture_begin(static_cast<Graph*>(share_pool_with)->graph.pool());
    else g->graph.capture_begin();
  } catch (...) {
    at::cuda::setCurrentCUDAStream(*g->previous);
    throw;
  }
#else
  (void)graph, (void)share_pool_with;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_graph_end(void* graph) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  auto* g = static_cast<Graph*>(graph);
  struct Restore {
    Graph* g;
    ~Restore() {
      if (g->previous) at::cuda::setCurrentCUDAStream(*g->previous);
    }
  } restore{g};
  g->graph.capture_end();
#else
  (void)graph;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API int32_t vt_cuda_graph_replay(void* graph) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  static_cast<Graph*>(graph)->graph.replay();
#else
  (void)graph;
  VT_NO_CUDA();
#endif
  VT_CATCH
}

VT_API void vt_cuda_graph_free(void* graph) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  delete static_cast<Graph*>(graph);
#else
  (void)graph;
#endif
  VT_CATCH_VOID
}

// cuDNN switches (PyTorch's torch.backends.cudnn.enabled / benchmark / deterministic):
// each of enabled, benchmark, deterministic is 0 or 1 to set, -1 to leave. out: the
// three states afterwards.
VT_API int32_t vt_cudnn_flags(int32_t enabled, int32_t benchmark, int32_t deterministic, double* out) {
  VT_TRY
  auto& ctx = at::globalContext();
  if (enabled >= 0) ctx.setUserEnabledCuDNN(enabled != 0);
  if (benchmark >= 0) ctx.setBenchmarkCuDNN(benchmark != 0);
  if (deterministic >= 0) ctx.setDeterministicCuDNN(deterministic != 0);
  out[0] = ctx.userEnabledCuDNN() ? 1 : 0;
  out[1] = ctx.benchmarkCuDNN() ? 1 : 0;
  out[2] = ctx.deterministicCuDNN() ? 1 : 0;
  VT_CATCH
}

// Starts (1) or stops (0) the CUDA profiler's collection, for tools that attach with
// collection off (ncu --profile-from-start off, nsys --capture-range=cudaProfilerApi).
// Looked up in the driver at run time, so the shim needs no extra link dependency.
VT_API int32_t vt_cuda_profiler(int32_t start) {
  VT_TRY
#ifdef VAGEN_WITH_CUDA
  using Fn = int (*)();
  static void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  TORCH_CHECK(driver != nullptr, "the CUDA driver is not loaded (no CUDA tensor yet?)");
  auto fn = reinterpret_cast<Fn>(::dlsym(driver, start != 0 ? "cuProfilerStart" : "cuProfilerStop"));
  TORCH_CHECK(fn != nullptr, "the CUDA driver has no profiler entry points");
  TORCH_CHECK(fn() == 0, "cuProfilerStart/Stop failed");
#else
  (void)start;
  VT_NO_CUDA();
#endif
  VT_CATCH
}
