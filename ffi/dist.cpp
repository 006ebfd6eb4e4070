// Process groups for data-parallel work over several processes (one per GPU, on one or
// several machines): a TCPStore rendezvous and libtorch's own c10d backends on it, Gloo
// (CPU tensors, every build) and NCCL (CUDA tensors, CUDA builds that found nccl.h).
// src/torch/distributed.ts is the other side.
//
//   * Every collective is blocking: it waits on its c10d Work with the group's timeout, so
//     a dead peer or a peer that never joins the collective becomes an error (c10d's own
//     message) within the timeout instead of a hang. NCCL is made blocking by turning on
//     c10d's blocking wait (TORCH_NCCL_BLOCKING_WAIT, unless the environment already says).
//   * The c10d API moved between 1.13 and 2.x: collectives live on ProcessGroup in 1.13
//     and on Backend (which ProcessGroupGloo/NCCL derive from) in 2.x. Both have the same
//     virtual collective signatures, so one alias (Group) covers both.
//   * Gloo's headers: ProcessGroupGloo.hpp includes them, but neither pip torch nor
//     Debian's libtorch-dev ships them (Debian has them in libgloo-dev; a build points
//     VAGEN_GLOO_INCLUDE at any other copy, src/shim/compile.ts). Only declarations are
//     used (no Gloo type is held by value), so Gloo's own version hardly matters. With
//     them, the real header is used. Without them, on 1.13 only, the few declarations
//     the shim calls are written out below with the class's exact 1.13 data layout
//     (checked by static_assert against the sizes the real header gives); nothing else
//     of Gloo is touched from here. VAGEN_GLOO=0 and
//     VAGEN_NCCL=0 at build time leave either backend out (src/shim/compile.ts).
//   * The gradient reducer (vt_dist_reducer_*) is the one piece that is not blocking: it
//     hooks the autograd engine, which runs on its own threads, and launches bucketed
//     all-reduces while the backward pass goes on (as c10d's Reducer does for DDP); its
//     finish call is the blocking wait.
//   * Gloo reduces host memory: on a Gloo group, CUDA tensors (ranks that share one GPU,
//     which NCCL refuses) are copied to the host for the collective and back after it.
//   * ReduceOp codes: 0 sum, 1 avg, 2 max, 3 min. Gloo has no avg: it sums, then divides
//     by the group size. Gloo has no reduce_scatter in 1.13, so on Gloo it is always an
//     all_reduce of the concatenated inputs that keeps this rank's chunk.
#include "shim.h"

// A libtorch whose c10d this file does not compile against still gets a shim: the build
// then compiles dist-stub.inc in its place (every entry point reports that process groups
// are not in this build), so everything else works and data parallel says why not.

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#if VT_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// ---- Gloo ---------------------------------------------------------------------------

#if defined(VAGEN_NO_GLOO)
// Left out on request (VAGEN_GLOO=0 when the shim is compiled).
#elif __has_include(<gloo/algorithm.h>) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>)
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define VT_DIST_GLOO 1
#elif TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13 && __has_include(<torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>)
// libtorch 1.13 without Gloo's headers (Debian's libtorch-dev without libgloo-dev). The
// declarations of torch/csrc/distributed/c10d/ProcessGroupGloo.hpp (1.13) that the shim
// calls, and its data members with their layout (members the shim never touches are
// typed by a layout-equal stand-in where the real type is Gloo's or a private class).
// Every function named here is defined in libtorch_cpu.so.
namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace c10d {
class TORCH_API ProcessGroupGloo : public ProcessGroup {
 public:
  struct TORCH_API Options : public ProcessGroup::Options {
    explicit Options(std::chrono::milliseconds timeout = kProcessGroupDefaultTimeout);
    static c10::intrusive_ptr<Options> create(std::chrono::milliseconds timeout = kProcessGroupDefaultTimeout) {
      return c10::make_intrusive<Options>(timeout);
    }
    std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
    int threads;
  };

  static std::shared_ptr<::gloo::transport::Device> createDeviceForInterface(const std::string& interface);
  static std::shared_ptr<::gloo::transport::Device> createDeviceForHostname(const std::string& hostname);
  static std::shared_ptr<::gloo::transport::Device> createDefaultDevice();

  explicit ProcessGroupGloo(const c10::intrusive_ptr<Store>& store, int rank, int size, c10::intrusive_ptr<Options> options);
  ~ProcessGroupGloo() override;

 protected:
  std::unique_ptr<::gloo::rendezvous::Store> store_;
  const c10::intrusive_ptr<Options> options_;
  std::vector<std::shared_ptr<::gloo::Context>> contexts_;
  std::vector<std::thread> threads_;
  bool stop_;
  uint32_t collectiveCounter_;
  // c10::intrusive_ptr<AsyncWork> in the real header: one pointer, like this.
  std::deque<c10::intrusive_ptr<Work>> workQueue_;
  std::vector<c10::intrusive_ptr<Work>> workInProgress_;
  std::mutex workMutex_;
  std::condition_variable workProduceCV_;
  std::condition_variable workConsumeCV_;
};
}  // namespace c10d

#if defined(__GLIBCXX__) && defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI == 1 && (defined(__x86_64__) || defined(__aarch64__))
// The sizes Debian's 1.13 header gives with libgloo-dev's headers (g++, x86-64).
static_assert(sizeof(c10d::ProcessGroupGloo) == 416, "ProcessGroupGloo's 1.13 layout differs from the real header's");
static_assert(sizeof(c10d::ProcessGroupGloo::Options) == 96, "ProcessGroupGloo::Options' 1.13 layout differs from the real header's");
#endif
#define VT_DIST_GLOO 1
#endif

// ---- NCCL (CUDA builds; build.ts defines VAGEN_WITH_NCCL when it finds nccl.h) --------

#if defined(VAGEN_WITH_CUDA) && defined(VAGEN_WITH_NCCL) && VT_TORCH_AT_LEAST(2, 0) && \
    __has_include(<nccl.h>) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define VT_DIST_NCCL 1
#endif

namespace {

#if VT_TORCH_AT_LEAST(2, 0)
using Group = c10d::Backend;
#else
using Group = c10d::ProcessGroup;
#endif

enum BackendCode : int32_t { kGloo = 0, kNccl = 1 };

struct DistStore {
  c10::intrusive_ptr<c10d::Store> store;
  std::chrono::milliseconds timeout;
};

struct DistGroup {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Group> pg;
  int32_t backend;
  int32_t rank;
  int32_t size;
  int32_t device;  // NCCL: the CUDA device of this rank; -1 otherwise
  std::chrono::milliseconds timeout;
};

DistStore& store_of(void* handle) {
  if (handle == nullptr) throw std::invalid_argument("use of a disposed store");
  return *static_cast<DistStore*>(handle);
}

DistGroup& group_of(void* handle) {
  if (handle == nullptr) throw std::invalid_argument("use of a disposed process group");
  return *static_cast<DistGroup*>(handle);
}

std::chrono::milliseconds millis(int64_t ms) { return std::chrono::milliseconds(ms); }

// Waits for a collective with the group's timeout. The backend's own timeout (the same
// value, passed in its options) normally fires first with the more precise message; the
// extra second only covers a backend that never reports.
void wait(const DistGroup& g, const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait(g.timeout + std::chrono::milliseconds(1000));
}

// Our reduce-op codes to c10d's; avg goes native only where the backend has it.
c10d::ReduceOp reduce_op(int32_t code, bool native_avg) {
  switch (code) {
    case 0: return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case 1: return c10d::ReduceOp(native_avg ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM);
    case 2: return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case 3: return c10d::ReduceOp(c10d::ReduceOp::MIN);
  }
  throw std::invalid_argument("unknown reduce op code " + std::to_string(code) + " (0 sum, 1 avg, 2 max, 3 min)");
}

bool native_avg(const DistGroup& g) { return g.backend == kNccl; }

void check_avg(int32_t op, const at::Tensor& t) {
  TORCH_CHECK(op != 1 || at::isFloatingType(t.scalar_type()), "avg needs a floating tensor, got ", t.scalar_type(),
              " (use sum and divide)");
}

// After a reduction the backend could not average: divide the sum by the group size.
void finish_avg(const DistGroup& g, int32_t op, at::Tensor& t) {
  if (op == 1 && !native_avg(g)) t.div_(static_cast<double>(g.size));
}

// Gloo works on host memory: a CUDA tensor on a Gloo group (ranks that share a GPU,
// which NCCL refuses) travels through a host copy.
bool via_host(const DistGroup& g, const at::Tensor& t) { return g.backend == kGloo && !t.is_cpu(); }

// All-reduce of one contiguous tensor, in place.
void all_reduce_contiguous(DistGroup& g, at::Tensor& t, int32_t op) {
  if (via_host(g, t)) {
    at::Tensor host = t.cpu();
    all_reduce_contiguous(g, host, op);
    t.copy_(host);
    return;
  }
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = reduce_op(op, native_avg(g));
  opts.timeout = g.timeout;
  wait(g, g.pg->allreduce(tensors, opts));
  finish_avg(g, op, t);
}

// Runs fn on t, or on a contiguous copy of it that is written back (c10d wants dense,
// contiguous tensors).
template <class Fn>
void in_place(at::Tensor& t, Fn fn) {
  if (t.is_contiguous()) {
    fn(t);
    return;
  }
  at::Tensor tmp = t.contiguous();
  fn(tmp);
  t.copy_(tmp);
}

#ifdef VT_DIST_GLOO
// "" the default device (this host's name, else loopback); "host:<address>" a device
// bound to that address; "iface:<name>[,<name>...]" one device per network interface.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const std::string& spec) {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  if (spec.rfind("host:", 0) == 0) {
    devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(spec.substr(5)));
  } else if (spec.rfind("iface:", 0) == 0) {
    std::string names = spec.substr(6);
    size_t start = 0;
    while (start <= names.size()) {
      size_t end = names.find(',', start);
      if (end == std::string::npos) end = names.size();
      if (end > start) devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(names.substr(start, end - start)));
      start = end + 1;
    }
    TORCH_CHECK(!devices.empty(), "no network interface named in \"", spec, "\"");
  } else {
    TORCH_CHECK(spec.empty(), "unknown Gloo device \"", spec, "\" (expected \"\", \"host:<address>\" or \"iface:<name>\")");
    devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return devices;
}
#endif

}  // namespace

using vt::T;

// out[0]: Gloo compiled in (1/0); out[1]: NCCL compiled in (1/0).
VT_API int32_t vt_dist_backends(double* out) {
  VT_TRY
#ifdef VT_DIST_GLOO
  out[0] = 1;
#else
  out[0] = 0;
#endif
#ifdef VT_DIST_NCCL
  out[1] = 1;
#else
  out[1] = 0;
#endif
  VT_CATCH
}

// ---- store --------------------------------------------------------------------------

// A TCPStore: rank 0 serves on `port` (0: any free port), the others connect to
// host:port, retrying until the timeout. Then every rank counts itself in and waits until
// all world_size ranks have (TCPStore's own wait for workers gives up silently on 1.13),
// so a missing rank is reported here, with how many joined.
// out: [store handle, the port it is on].
VT_API int32_t vt_dist_store_new(const char* host, int32_t port, int32_t world_size, int32_t rank, int64_t timeout_ms,
                                 double* out) {
  VT_TRY
  TORCH_CHECK(world_size >= 1, "world size must be at least 1, got ", world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " is outside the world of ", world_size);
  TORCH_CHECK(port >= 0 && port <= 65535, "port ", port, " is not a TCP port");
  TORCH_CHECK(timeout_ms > 0, "timeout must be positive, got ", timeout_ms, " ms");
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = rank == 0;
  opts.numWorkers = static_cast<std::size_t>(world_size);
  opts.waitWorkers = false;
  opts.timeout = millis(timeout_ms);
#if VT_TORCH_AT_LEAST(2, 3)
  // torch 2.4 on serves the store on libuv by default; inside Bun, libuv's entry points
  // resolve to Bun's own partial stand-ins (measured: a crash in uv_loop_init), so the
  // store keeps its classic socket server.
  opts.useLibUV = false;
#endif
  auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
  const std::string joined = "vagen_init/joined";
  tcp->add(joined, 1);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const int64_t n = tcp->add(joined, 0);
    if (n >= world_size) break;
    TORCH_CHECK(std::chrono::steady_clock::now() - start < millis(timeout_ms), "timed out after ", timeout_ms,
                " ms waiting for the other ranks: ", n, " of ", world_size, " joined the store at ", host, ":",
                tcp->getPort());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  out[1] = static_cast<double>(tcp->getPort());
  auto* s = new DistStore{tcp, millis(timeout_ms)};
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(s));
  VT_CATCH
}

VT_API int32_t vt_dist_store_set(void* store, const char* key, const uint8_t* data, int64_t length) {
  VT_TRY
  auto& s = store_of(store);
  TORCH_CHECK(length >= 0, "negative length");
  std::vector<uint8_t> value(static_cast<size_t>(length));
  if (length > 0) std::memcpy(value.data(), data, static_cast<size_t>(length));
  s.store->set(std::string(key), value);
  VT_CATCH
}

// Blocks until `key` exists (timeout_ms < 0: the store's timeout), then reads it.
// out: [bytes handle, length]; copy with vt_dist_bytes_read, then vt_dist_bytes_free.
VT_API int32_t vt_dist_store_get(void* store, const char* key, int64_t timeout_ms, double* out) {
  VT_TRY
  auto& s = store_of(store);
  std::string k(key);
  s.store->wait({k}, timeout_ms < 0 ? s.timeout : millis(timeout_ms));
  auto* bytes = new std::vector<uint8_t>(s.store->get(k));
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(bytes));
  out[1] = static_cast<double>(bytes->size());
  VT_CATCH
}

VT_API int32_t vt_dist_bytes_read(void* bytes, uint8_t* dst, int64_t capacity) {
  VT_TRY
  TORCH_CHECK(bytes != nullptr, "use of freed bytes");
  auto* v = static_cast<std::vector<uint8_t>*>(bytes);
  TORCH_CHECK(static_cast<int64_t>(v->size()) <= capacity, "buffer of ", capacity, " bytes for ", v->size());
  if (!v->empty()) std::memcpy(dst, v->data(), v->size());
  VT_CATCH
}

VT_API void vt_dist_bytes_free(void* bytes) {
  VT_TRY
  delete static_cast<std::vector<uint8_t>*>(bytes);
  VT_CATCH_VOID
}

VT_API void vt_dist_store_free(void* store) {
  VT_TRY
  delete static_cast<DistStore*>(store);
  VT_CATCH_VOID
}

// ---- process group --------------------------------------------------------------------

// A process group over `store` (which it keeps alive; its keys go under "vagen_pg/").
// backend: 0 Gloo, 1 NCCL. device: NCCL's CUDA device for this rank (made current; -1:
// the current one). gloo_device_spec: see gloo_devices() above. The constructor is itself a
// rendezvous: it returns once every rank has connected, or throws after the timeout.
// out: [group handle].
VT_API int32_t vt_dist_pg_new(void* store, int32_t backend, int32_t rank, int32_t world_size, int64_t timeout_ms,
                              int32_t device, const char* gloo_device_spec, double* out) {
  VT_TRY
  auto& s = store_of(store);
  TORCH_CHECK(world_size >= 1, "world size must be at least 1, got ", world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " is outside the world of ", world_size);
  TORCH_CHECK(timeout_ms > 0, "timeout must be positive, got ", timeout_ms, " ms");
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("vagen_pg", s.store);
  auto timeout = millis(timeout_ms);
  c10::intrusive_ptr<Group> pg;
  int32_t nccl_device = -1;
  if (backend == kGloo) {
#ifdef VT_DIST_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices = gloo_devices(std::string(gloo_device_spec));
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, world_size, opts);
#else
    (void)gloo_device_spec;
    TORCH_CHECK(false, "this build of vagen's libtorch shim has no Gloo (left out with VAGEN_GLOO=0, or libtorch ",
                TORCH_VERSION, " without Gloo's headers: install them, on Debian libgloo-dev, and rebuild the shim)");
#endif
  } else if (backend == kNccl) {
#ifdef VT_DIST_NCCL
    if (device >= 0) c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
    nccl_device = device >= 0 ? device : static_cast<int32_t>(c10::cuda::current_device());
    // Blocking wait: Work::wait() blocks the host until the collective finished and
    // throws once it outlives the timeout (without it, wait() only orders streams and a
    // hang is left to the watchdog, which ends the process). An explicit setting wins.
#if VT_TORCH_AT_LEAST(2, 2)
    if (std::getenv("TORCH_NCCL_BLOCKING_WAIT") == nullptr && std::getenv("NCCL_BLOCKING_WAIT") == nullptr)
      ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 0);
#else
    if (std::getenv("NCCL_BLOCKING_WAIT") == nullptr) ::setenv("NCCL_BLOCKING_WAIT", "1", 0);
#endif
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank, world_size, opts);
#else
    (void)device;
    TORCH_CHECK(false, "this build of vagen's libtorch shim has no NCCL (it needs a CUDA build of libtorch 2.x and nccl.h "
                       "when the shim is compiled; libtorch ", TORCH_VERSION, ")");
#endif
  } else {
    TORCH_CHECK(false, "unknown backend code ", backend, " (0 gloo, 1 nccl)");
  }
  auto* g = new DistGroup{s.store, pg, backend, rank, world_size, nccl_device, timeout};
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(g));
  VT_CATCH
}

// In place: every rank's tensor becomes the reduction over all ranks.
VT_API int32_t vt_dist_all_reduce(void* group, void* tensor, int32_t op) {
  VT_TRY
  auto& g = group_of(group);
  at::Tensor& t = T(tensor);
  check_avg(op, t);
  in_place(t, [&](at::Tensor& c) { all_reduce_contiguous(g, c, op); });
  VT_CATCH
}

// One all-reduce per (dtype, device) over the tensors flattened into one buffer, each
// written back in place.
VT_API int32_t vt_dist_all_reduce_coalesced(void* group, const double* handles, int32_t n, int32_t op) {
  VT_TRY
  auto& g = group_of(group);
  auto tensors = vt::tensors(handles, n);
  for (auto& t : tensors) check_avg(op, t);
  std::vector<bool> done(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); i++) {
    if (done[i]) continue;
    std::vector<size_t> members;
    for (size_t j = i; j < tensors.size(); j++) {
      if (!done[j] && tensors[j].scalar_type() == tensors[i].scalar_type() && tensors[j].device() == tensors[i].device()) {
        members.push_back(j);
        done[j] = true;
      }
    }
    std::vector<at::Tensor> flat;
    flat.reserve(members.size());
    for (size_t j : members) flat.push_back(tensors[j].reshape({-1}));
    at::Tensor buffer = at::cat(flat);
    all_reduce_contiguous(g, buffer, op);
    int64_t offset = 0;
    for (size_t j : members) {
      at::Tensor& t = tensors[j];
      t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  VT_CATCH
}

// out[0..size): new tensors, out[r] = rank r's `tensor`.
VT_API int32_t vt_dist_all_gather(void* group, void* tensor, double* out) {
  VT_TRY
  auto& g = group_of(group);
  const at::Tensor& given = T(tensor);
  const bool host = via_host(g, given);
  std::vector<at::Tensor> inputs{host ? given.cpu().contiguous() : given.contiguous()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int32_t r = 0; r < g.size; r++) outputs[0].push_back(at::empty_like(inputs[0], at::MemoryFormat::Contiguous));
  c10d::AllgatherOptions opts;
  opts.timeout = g.timeout;
  wait(g, g.pg->allgather(outputs, inputs, opts));
  for (int32_t r = 0; r < g.size; r++) {
    const at::Tensor& o = outputs[0][static_cast<size_t>(r)];
    out[r] = vt::wrap(host ? o.to(given.device()) : o);
  }
  VT_CATCH
}

// In place: every rank's tensor becomes rank `root`'s.
VT_API int32_t vt_dist_broadcast(void* group, void* tensor, int32_t root) {
  VT_TRY
  auto& g = group_of(group);
  TORCH_CHECK(root >= 0 && root < g.size, "broadcast root ", root, " is outside the group of ", g.size);
  at::Tensor& t = T(tensor);
  in_place(t, [&](at::Tensor& given) {
    at::Tensor c = via_host(g, given) ? given.cpu() : given;
    std::vector<at::Tensor> tensors{c};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.rootTensor = 0;
    opts.timeout = g.timeout;
    wait(g, g.pg->broadcast(tensors, opts));
    if (!c.is_same(given)) given.copy_(c);
  });
  VT_CATCH
}

// `output` (in place) = the reduction over all ranks of their inputs[rank]; inputs holds
// one tensor per rank, each shaped like output.
VT_API int32_t vt_dist_reduce_scatter(void* group, void* output, const double* inputs, int32_t n, int32_t op) {
  VT_TRY
  auto& g = group_of(group);
  at::Tensor& out = T(output);
  TORCH_CHECK(n == g.size, "reduce_scatter needs one input per rank (", g.size, "), got ", n);
  auto ins = vt::tensors(inputs, n);
  check_avg(op, out);
  for (int32_t r = 0; r < n; r++) {
    TORCH_CHECK(ins[r].sizes() == out.sizes(), "reduce_scatter input ", r, " has shape ", ins[r].sizes(), ", the output ",
                out.sizes());
    TORCH_CHECK(ins[r].scalar_type() == out.scalar_type(), "reduce_scatter input ", r, " is ", ins[r].scalar_type(),
                ", the output ", out.scalar_type());
  }
  if (g.backend == kGloo) {
    // Gloo (1.13) has no reduce_scatter: all-reduce everything, keep this rank's chunk.
    std::vector<at::Tensor> flat;
    flat.reserve(ins.size());
    for (auto& t : ins) flat.push_back(t.reshape({-1}));
    at::Tensor buffer = at::cat(flat);
    all_reduce_contiguous(g, buffer, op);
    out.copy_(buffer.narrow(0, static_cast<int64_t>(g.rank) * out.numel(), out.numel()).view(out.sizes()));
  } else {
    in_place(out, [&](at::Tensor& c) {
      std::vector<at::Tensor> outputs{c};
      std::vector<std::vector<at::Tensor>> inputs_per_rank(1);
      for (auto& t : ins) inputs_per_rank[0].push_back(t.contiguous());
      c10d::ReduceScatterOptions opts;
      opts.reduceOp = reduce_op(op, native_avg(g));
      opts.timeout = g.timeout;
      wait(g, g.pg->reduce_scatter(outputs, inputs_per_rank, opts));
      finish_avg(g, op, c);
    });
  }
  VT_CATCH
}

// ---- gradient reducer: bucketed all-reduce overlapping the backward pass ----------------
//
// What DDP's c10d Reducer does, reduced to what the trainer needs. At creation, the
// trainable parameters are cut into buckets of about `bucket_bytes` each, in reverse
// registration order (the order a backward pass produces their gradients), never mixing
// dtypes or devices; a post hook goes on each parameter's gradient accumulator. During a
// synced backward (vt_dist_reducer_prepare(.., 1)), a hook marks its parameter ready once
// its gradient is accumulated; when every parameter of the next bucket in order is ready,
// the bucket's gradients are flattened into one buffer and its all-reduce (sum) is
// launched without waiting. Buckets launch strictly in index order on every rank, because
// c10d matches collectives by their order: a bucket whose parameter got no gradient holds
// the later ones back until finish, which launches what is left (a gradient that never
// came is zero-filled), waits on every bucket and writes the reduced sums back into the
// parameters' gradients. Backward passes with prepare(.., 0) accumulate locally only
// (DDP's no_sync): micro-batches reduce once, in the last one's backward.
//
// With owners (ZeRO stage 2: each parameter stepped by one rank), a rank keeps the reduced
// gradient of the parameters it owns only, and a bucket is reduce-scattered instead of
// all-reduced: its members are laid out by owner, each owner's segment padded to the
// bucket's largest, so that chunk r of the flat buffer is rank r's share; every rank then
// receives its own chunk's sums only (half of an all-reduce's traffic; the parameters come
// back by broadcast after the step). A bucket's other gradients are freed once flattened.
// Gloo has no reduce-scatter in 1.13: there the padded buffer is all-reduced and the
// rank's chunk read out of it.
//
// The hooks run on the autograd engine's threads (one per device); a mutex guards the
// state. A hook never throws into the engine: a failure is recorded and finish reports it.

namespace {

struct GradBucket {
  std::vector<size_t> members;  // parameter indices, in bucket order (by owner, with owners)
  int64_t numel = 0;
  size_t pending = 0;  // members not yet ready in this synced pass
  // with owners: each rank's segment of the members' elements, and the padded chunk size
  std::vector<int64_t> segment;
  int64_t chunk = 0;
  at::Tensor buffer;  // the flat gradients (padded by owner with owners)
  at::Tensor mine;    // reduce-scatter's output: this rank's chunk of the sums
  c10::intrusive_ptr<c10d::Work> work;
};

struct GradReducer;

// A post hook on a gradient accumulator: tells the reducer its parameter is ready.
struct ReadyHook : public torch::autograd::FunctionPostHook {
  ReadyHook(GradReducer* reducer, size_t index) : reducer(reducer), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /* inputs */) override;
  GradReducer* reducer;
  size_t index;
};

struct GradReducer {
  DistGroup group;  // a copy: the reducer keeps the backend (and its store) alive
  std::vector<at::Tensor> params;
  std::vector<bool> keep;
  std::vector<int32_t> owner;  // empty: every rank keeps every sum (all-reduce)
  std::vector<size_t> bucket_of;
  std::vector<GradBucket> buckets;
  std::vector<std::pair<uintptr_t, std::shared_ptr<torch::autograd::Node>>> hooks;
  std::vector<bool> ready;
  size_t next_bucket = 0;
  bool sync = false;
  std::string error;
  std::mutex mu;

  // Called with mu held.
  void mark_ready(size_t i) {
    if (!sync || !error.empty()) return;
    if (ready[i]) {
      error = "the gradient of parameter " + std::to_string(i) +
              " arrived twice before finish (two synced backward passes: prepare(sync=false) for all but the last)";
      return;
    }
    ready[i] = true;
    GradBucket& b = buckets[bucket_of[i]];
    if (b.pending > 0) b.pending--;
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) launch(next_bucket++);
  }

  // Flattens bucket `k` and launches its all-reduce. Called with mu held.
  void launch(size_t k) {
    if (!error.empty()) return;
    try {
      c10::AutoGradMode no_grad(false);
      GradBucket& b = buckets[k];
      std::vector<at::Tensor> flat;
      flat.reserve(b.members.size() + b.segment.size());
      const at::Tensor& first = params[b.members[0]];
      size_t next = 0;
      for (size_t m : b.members) {
        // with owners, members come by owner: pad each finished segment to the chunk
        while (!owner.empty() && static_cast<size_t>(owner[m]) > next) pad(flat, b, next++, first);
        const at::Tensor& g = params[m].grad();
        // a parameter no backward reached: its share of the sum is zero
        flat.push_back(g.defined() ? g.reshape({-1}) : at::zeros({params[m].numel()}, first.options()));
      }
      while (next < b.segment.size()) pad(flat, b, next++, first);
      b.buffer = at::cat(flat);
      // Gloo over CUDA gradients (ranks sharing a GPU): the bucket is summed in host memory.
      if (via_host(group, b.buffer)) b.buffer = b.buffer.cpu();
      for (size_t m : b.members) {
        if (!keep[m]) params[m].mutable_grad().reset();
      }
      if (!owner.empty() && group.backend != kGloo) {
        b.mine = at::empty({b.chunk}, b.buffer.options());
        c10d::ReduceScatterOptions opts;
        opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
        opts.timeout = group.timeout;
        b.work = group.pg->_reduce_scatter_base(b.mine, b.buffer, opts);
        return;
      }
      std::vector<at::Tensor> tensors{b.buffer};
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
      opts.timeout = group.timeout;
      b.work = group.pg->allreduce(tensors, opts);
    } catch (const std::exception& e) {
      error = std::string("launching the reduction of gradient bucket ") + std::to_string(k) + ": " + e.what();
    }
  }

  // The zeros after rank r's segment that fill it to the bucket's chunk.
  static void pad(std::vector<at::Tensor>& flat, const GradBucket& b, size_t r, const at::Tensor& like) {
    const int64_t missing = b.chunk - b.segment[r];
    if (missing > 0) flat.push_back(at::zeros({missing}, like.options()));
  }

  // Where this rank's sums of bucket `b` are once its work is done: the whole buffer, or
  // with owners this rank's chunk (its first kept member at offset 0).
  at::Tensor sums(GradBucket& b) {
    if (owner.empty()) return b.buffer;
    if (b.mine.defined()) return b.mine;
    return b.buffer.narrow(0, static_cast<int64_t>(group.rank) * b.chunk, b.chunk);
  }

  // Back to the state before a synced pass.
  void reset() {
    for (auto& b : buckets) {
      b.pending = b.members.size();
      b.buffer = at::Tensor();
      b.mine = at::Tensor();
      b.work.reset();
    }
    std::fill(ready.begin(), ready.end(), false);
    next_bucket = 0;
    sync = false;
    error.clear();
  }
};

torch::autograd::variable_list ReadyHook::operator()(const torch::autograd::variable_list& outputs,
                                                     const torch::autograd::variable_list& /* inputs */) {
  std::lock_guard<std::mutex> lock(reducer->mu);
  reducer->mark_ready(index);
  return outputs;
}

GradReducer& reducer_of(void* handle) {
  if (handle == nullptr) throw std::invalid_argument("use of a disposed gradient reducer");
  return *static_cast<GradReducer*>(handle);
}

}  // namespace

// A reducer over the parameters (leaves that require grad; at most one reducer each).
// bucket_bytes: a bucket's size cap (a parameter larger than it gets a bucket of its own).
// owner: null (every rank keeps every reduced gradient; buckets are all-reduced) or each
// parameter's owner rank (ZeRO stage 2: a rank keeps the sums of its own parameters, and
// buckets are reduce-scattered). out: [reducer handle, bucket count]; bucket_of (n
// doubles): each parameter's bucket.
VT_API int32_t vt_dist_reducer_new(void* group, const double* handles, int32_t n, int64_t bucket_bytes,
                                   const double* owner, double* out, double* bucket_of) {
  VT_TRY
  auto& g = group_of(group);
  TORCH_CHECK(n >= 1, "a gradient reducer needs at least one parameter");
  TORCH_CHECK(bucket_bytes >= 1, "bucket size must be positive, got ", bucket_bytes, " bytes");
  auto r = std::make_unique<GradReducer>();
  r->group = g;
  r->params = vt::tensors(handles, n);
  for (int32_t i = 0; i < n; i++) {
    const at::Tensor& p = r->params[static_cast<size_t>(i)];
    TORCH_CHECK(p.requires_grad() && p.is_leaf(), "parameter ", i, " is not a leaf that requires grad");
    TORCH_CHECK(!p.is_sparse(), "parameter ", i, " is sparse");
    if (owner != nullptr) {
      const double o = owner[i];
      TORCH_CHECK(o >= 0 && o < g.size && o == static_cast<int32_t>(o), "parameter ", i, "'s owner ", o,
                  " is not a rank of this group of ", g.size);
      r->owner.push_back(static_cast<int32_t>(o));
    }
    r->keep.push_back(owner == nullptr || static_cast<int32_t>(owner[i]) == g.rank);
  }
  // Reverse registration order; a new bucket when the cap would be passed or the
  // dtype or device changes.
  r->bucket_of.assign(static_cast<size_t>(n), 0);
  int64_t bytes = 0;
  for (int32_t i = n - 1; i >= 0; i--) {
    const at::Tensor& p = r->params[static_cast<size_t>(i)];
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    bool fresh = r->buckets.empty();
    if (!fresh) {
      const at::Tensor& head = r->params[r->buckets.back().members[0]];
      fresh = head.scalar_type() != p.scalar_type() || head.device() != p.device() || bytes + size > bucket_bytes;
    }
    if (fresh) {
      r->buckets.emplace_back();
      bytes = 0;
    }
    GradBucket& b = r->buckets.back();
    b.members.push_back(static_cast<size_t>(i));
    b.numel += p.numel();
    bytes += size;
    r->bucket_of[static_cast<size_t>(i)] = r->buckets.size() - 1;
  }
  if (!r->owner.empty()) {
    // members by owner (in bucket order within an owner); each owner's segment, padded to the largest
    for (auto& b : r->buckets) {
      std::stable_sort(b.members.begin(), b.members.end(),
                       [&](size_t x, size_t y) { return r->owner[x] < r->owner[y]; });
      b.segment.assign(static_cast<size_t>(g.size), 0);
      for (size_t m : b.members) b.segment[static_cast<size_t>(r->owner[m])] += r->params[m].numel();
      b.chunk = *std::max_element(b.segment.begin(), b.segment.end());
    }
  }
  r->ready.assign(static_cast<size_t>(n), false);
  r->reset();
  for (int32_t i = 0; i < n; i++) {
    auto acc = torch::autograd::impl::grad_accumulator(r->params[static_cast<size_t>(i)]);
    TORCH_CHECK(acc != nullptr, "parameter ", i, " has no gradient accumulator");
    const uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>(r.get(), static_cast<size_t>(i)));
    r->hooks.emplace_back(key, std::move(acc));
  }
  for (int32_t i = 0; i < n; i++) bucket_of[i] = static_cast<double>(r->bucket_of[static_cast<size_t>(i)]);
  out[1] = static_cast<double>(r->buckets.size());
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(r.release()));
  VT_CATCH
}

// Whether the backward passes until the next finish reduce (1: the last micro-batch's
// backward) or only accumulate locally (0). A new synced pass starts from no bucket ready.
VT_API int32_t vt_dist_reducer_prepare(void* reducer, int32_t sync) {
  VT_TRY
  auto& r = reducer_of(reducer);
  std::lock_guard<std::mutex> lock(r.mu);
  TORCH_CHECK(r.next_bucket == 0 || sync != 0, "prepare(sync=false) while a synced pass has launched buckets: call finish first");
  r.sync = sync != 0;
  VT_CATCH
}

// Launches what the backward left (all of it when no synced backward ran), waits on every
// bucket with the group's timeout and writes the sums back into the gradients (each
// divided by `divisor` when it is not 1); a kept parameter without a gradient gets one.
// Throws a launch failure or c10d's error (a dead peer, a timeout).
VT_API int32_t vt_dist_reducer_finish(void* reducer, double divisor) {
  VT_TRY
  auto& r = reducer_of(reducer);
  std::lock_guard<std::mutex> lock(r.mu);
  TORCH_CHECK(divisor != 0, "cannot divide the reduced gradients by 0");
  struct Reset {
    GradReducer& r;
    ~Reset() { r.reset(); }
  } reset{r};
  while (r.next_bucket < r.buckets.size()) r.launch(r.next_bucket++);
  if (!r.error.empty()) throw std::runtime_error(r.error);
  c10::AutoGradMode no_grad(false);
  for (size_t k = 0; k < r.buckets.size(); k++) {
    GradBucket& b = r.buckets[k];
    b.work->wait(r.group.timeout + std::chrono::milliseconds(1000));
    at::Tensor sums = r.sums(b);
    int64_t offset = 0;
    if (divisor != 1) sums.div_(divisor);
    for (size_t m : b.members) {
      at::Tensor& p = r.params[m];
      const int64_t numel = p.numel();
      // with owners, the sums hold this rank's segment only
      if (!r.owner.empty() && !r.keep[m]) continue;
      if (r.keep[m]) {
        at::Tensor sum = sums.narrow(0, offset, numel).view(p.sizes());
        at::Tensor& grad = p.mutable_grad();
        if (grad.defined()) {
          grad.copy_(sum);
        } else {
          grad = at::empty_like(p, at::MemoryFormat::Contiguous);
          grad.copy_(sum);
        }
      }
      offset += numel;
    }
  }
  VT_CATCH
}

// Unregisters the hooks and frees the reducer (never during a backward pass).
VT_API void vt_dist_reducer_free(void* reducer) {
  VT_TRY
  auto* r = static_cast<GradReducer*>(reducer);
  if (r == nullptr) return;
  for (auto& [key, acc] : r->hooks) acc->del_post_hook(key);
  r->hooks.clear();
  {
    // wait for what a failed or abandoned pass left in flight, so no buffer is freed under it
    std::lock_guard<std::mutex> lock(r->mu);
    for (auto& b : r->buckets) {
      if (!b.work) continue;
      try {
        b.work->wait(r->group.timeout + std::chrono::milliseconds(1000));
      } catch (...) {
      }
    }
  }
  delete r;
  VT_CATCH_VOID
}

// Deletes `key` from the store; out[0]: whether it was there.
VT_API int32_t vt_dist_store_delete(void* store, const char* key, double* out) {
  VT_TRY
  auto& s = store_of(store);
  out[0] = s.store->deleteKey(std::string(key)) ? 1 : 0;
  VT_CATCH
}

// Returns once every rank has entered the barrier (and, on Gloo, this rank's earlier
// collectives have finished).
VT_API int32_t vt_dist_barrier(void* group) {
  VT_TRY
  auto& g = group_of(group);
  c10d::BarrierOptions opts;
  if (g.device >= 0) opts.device_ids = {static_cast<int64_t>(g.device)};
  opts.timeout = g.timeout;
  wait(g, g.pg->barrier(opts));
  VT_CATCH
}

// out: [backend code, rank, size, device, timeout ms].
VT_API int32_t vt_dist_pg_info(void* group, double* out) {
  VT_TRY
  auto& g = group_of(group);
  out[0] = g.backend;
  out[1] = g.rank;
  out[2] = g.size;
  out[3] = g.device;
  out[4] = static_cast<double>(g.timeout.count());
  VT_CATCH
}

// Frees the group (its worker threads end once their queued work has; on Gloo that may
// take up to the timeout when a peer is gone). The store lives on while its handle does.
VT_API void vt_dist_pg_free(void* group) {
  VT_TRY
  delete static_cast<DistGroup*>(group);
  VT_CATCH_VOID
}
