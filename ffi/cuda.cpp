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
#include <glob.h>

namespace {
// cuDNN's runtime-compiled engines dlopen NVRTC by soname. Python's torch package
// preloads it from the nvidia-* wheels on import; a plain process would not find it
// there, and cuDNN then calls through a null pointer. Loading it once here (RTLD_LOCAL:
// nothing is interposed) lets the loader match cuDNN's later dlopen by soname.
void preload(const std::string& pattern) {
  glob_t found;
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; i++) ::dlopen(found.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
  }
  ::globfree(&found);
}

[[maybe_unused]] const bool nvrtc_preloaded = [] {
#ifdef VAGEN_LIBTORCH_ROOT
  preload(std::string(VAGEN_LIBTORCH_ROOT) + "/../nvidia/*/lib/libnvrtc.so.*");
  preload(std::string(VAGEN_LIBTORCH_ROOT) + "/../nvidia/*/lib/libnvrtc-builtins.so.*");
#endif
  return true;
}();

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

VT_API int32_t vt_cuda_device_count() {
  try {
    return static_cast<int32_t>(at::detail::getCUDAHooks().getNumGPUs());
  } catch (...) {
    return 0;
  }
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
#ifdef VAGEN_WITH_CUDA
  delete static_cast<c10::cuda::CUDAStream*>(stream);
#else
  (void)stream;
#endif
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
#ifdef VAGEN_WITH_CUDA
  delete static_cast<at::cuda::CUDAEvent*>(event);
#else
  (void)event;
#endif
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
#ifdef VAGEN_WITH_CUDA
  delete static_cast<Graph*>(graph);
#else
  (void)graph;
#endif
}
