#include "hpod/train/comm/nccl_communicator.h"

#include "fmt/format.h"

#ifdef HPOD_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>
#endif

namespace hpod::train::comm {

#ifndef HPOD_HAVE_NCCL

bool NcclCompiledIn() { return false; }
int CudaDeviceCount() { return 0; }
StatusOr<std::unique_ptr<Communicator>> ConnectNccl(Store&, const NcclOptions&) {
  return UnimplementedError(
      "this hpod-train was built without NCCL (CMake found no CUDA toolkit with nccl.h); use "
      "--comm gloo");
}

#else

namespace {

using Clock = std::chrono::steady_clock;

// The CUDA runtime and NCCL, opened at run time (as NVIDIA's own tools open
// NVML): the headers give the types at build time, but hpod-train neither
// links libcudart/libnccl (208 MB) nor needs them on a node that never asks
// for --comm nccl, and a CPU-only node still starts.
struct Api {
  bool ok = false;
  std::string error;
#define HPOD_CUDA_FN(name) decltype(&::name) name = nullptr;
  HPOD_CUDA_FN(cudaGetDeviceCount)
  HPOD_CUDA_FN(cudaSetDevice)
  // cudaMalloc has C++ template overloads: its C entry point by type.
  cudaError_t (*cudaMalloc)(void**, size_t) = nullptr;
  HPOD_CUDA_FN(cudaFree)
  HPOD_CUDA_FN(cudaMemcpyAsync)
  HPOD_CUDA_FN(cudaMemsetAsync)
  HPOD_CUDA_FN(cudaStreamCreateWithFlags)
  HPOD_CUDA_FN(cudaStreamDestroy)
  HPOD_CUDA_FN(cudaStreamQuery)
  HPOD_CUDA_FN(cudaGetErrorString)
  HPOD_CUDA_FN(ncclGetVersion)
  HPOD_CUDA_FN(ncclGetUniqueId)
  HPOD_CUDA_FN(ncclCommInitRank)
  HPOD_CUDA_FN(ncclCommDestroy)
  HPOD_CUDA_FN(ncclCommAbort)
  HPOD_CUDA_FN(ncclCommGetAsyncError)
  HPOD_CUDA_FN(ncclGetErrorString)
  HPOD_CUDA_FN(ncclAllReduce)
  HPOD_CUDA_FN(ncclReduceScatter)
  HPOD_CUDA_FN(ncclAllGather)
  HPOD_CUDA_FN(ncclBroadcast)
#undef HPOD_CUDA_FN
};

const Api& Cu() {
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* rt = dlopen("libcudart.so." HPOD_CUDART_MAJOR, RTLD_NOW | RTLD_LOCAL);
    if (rt == nullptr) rt = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    void* nc = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (rt == nullptr || nc == nullptr) {
      api.error = fmt::format("cannot load {}: {}", rt == nullptr ? "libcudart" : "libnccl.so.2",
                              dlerror());
      return;
    }
    bool all = true;
    auto sym = [&](void* lib, const char* name, auto& fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr) {
        all = false;
        if (api.error.empty()) api.error = std::string("missing symbol ") + name;
      }
    };
#define HPOD_RT(name) sym(rt, #name, api.name);
#define HPOD_NC(name) sym(nc, #name, api.name);
    HPOD_RT(cudaGetDeviceCount)
    HPOD_RT(cudaSetDevice)
    HPOD_RT(cudaMalloc)
    HPOD_RT(cudaFree)
    HPOD_RT(cudaMemcpyAsync)
    HPOD_RT(cudaMemsetAsync)
    HPOD_RT(cudaStreamCreateWithFlags)
    HPOD_RT(cudaStreamDestroy)
    HPOD_RT(cudaStreamQuery)
    HPOD_RT(cudaGetErrorString)
    HPOD_NC(ncclGetVersion)
    HPOD_NC(ncclGetUniqueId)
    HPOD_NC(ncclCommInitRank)
    HPOD_NC(ncclCommDestroy)
    HPOD_NC(ncclCommAbort)
    HPOD_NC(ncclCommGetAsyncError)
    HPOD_NC(ncclGetErrorString)
    HPOD_NC(ncclAllReduce)
    HPOD_NC(ncclReduceScatter)
    HPOD_NC(ncclAllGather)
    HPOD_NC(ncclBroadcast)
#undef HPOD_RT
#undef HPOD_NC
    api.ok = all;
  });
  return api;
}

std::string CudaError(cudaError_t e) { return Cu().cudaGetErrorString(e); }

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, NcclOptions o)
      : comm_(comm), stream_(stream), o_(std::move(o)) {}

  ~NcclCommunicator() override {
    if (buffer_ != nullptr) Cu().cudaFree(buffer_);
    if (comm_ != nullptr) Cu().ncclCommDestroy(comm_);
    if (stream_ != nullptr) Cu().cudaStreamDestroy(stream_);
  }

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::string backend() const override {
    int v = 0;
    Cu().ncclGetVersion(&v);
    return fmt::format("nccl {}.{}.{} (host-staged)", v / 10000, v / 100 % 100, v % 100);
  }

  Status AllReduceSum(float* data, int64_t n, const CollectiveOptions& o) override {
    if (n == 0) return OkStatus();
    const size_t bytes = static_cast<size_t>(n) * 4;
    HPOD_RETURN_IF_ERROR(Reserve(bytes));
    HPOD_RETURN_IF_ERROR(
        Cuda(Cu().cudaMemcpyAsync(buffer_, data, bytes, cudaMemcpyHostToDevice, stream_)));
    HPOD_RETURN_IF_ERROR(Nccl(Cu().ncclAllReduce(buffer_, buffer_, static_cast<size_t>(n),
                                                 ncclFloat, ncclSum, comm_, stream_),
                              "allreduce", o));
    HPOD_RETURN_IF_ERROR(
        Cuda(Cu().cudaMemcpyAsync(data, buffer_, bytes, cudaMemcpyDeviceToHost, stream_)));
    return Finish("allreduce", o);
  }

  Status ReduceScatterSum(float* data, std::span<const int64_t> counts,
                          const CollectiveOptions& o) override {
    HPOD_RETURN_IF_ERROR(CheckCounts(counts));
    const int64_t per = *std::max_element(counts.begin(), counts.end());
    if (per == 0) return OkStatus();
    // [chunk 0 | chunk 1 | ...] each `per` floats (zero padded), then the result.
    const size_t chunk = static_cast<size_t>(per) * 4;
    HPOD_RETURN_IF_ERROR(Reserve(chunk * (o_.size + 1)));
    char* dev = static_cast<char*>(buffer_);
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemsetAsync(dev, 0, chunk * o_.size, stream_)));
    int64_t off = 0;
    for (int r = 0; r < o_.size; ++r) {
      HPOD_RETURN_IF_ERROR(
          Cuda(Cu().cudaMemcpyAsync(dev + chunk * r, data + off, static_cast<size_t>(counts[r]) * 4,
                                    cudaMemcpyHostToDevice, stream_)));
      off += counts[r];
    }
    char* out = dev + chunk * o_.size;
    HPOD_RETURN_IF_ERROR(Nccl(Cu().ncclReduceScatter(dev, out, static_cast<size_t>(per), ncclFloat,
                                                     ncclSum, comm_, stream_),
                              "reduce-scatter", o));
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemcpyAsync(data + ShardOffset(counts, o_.rank), out,
                                                   static_cast<size_t>(counts[o_.rank]) * 4,
                                                   cudaMemcpyDeviceToHost, stream_)));
    return Finish("reduce-scatter", o);
  }

  Status AllGather(float* data, std::span<const int64_t> counts,
                   const CollectiveOptions& o) override {
    HPOD_RETURN_IF_ERROR(CheckCounts(counts));
    const int64_t per = *std::max_element(counts.begin(), counts.end());
    if (per == 0) return OkStatus();
    const size_t chunk = static_cast<size_t>(per) * 4;
    HPOD_RETURN_IF_ERROR(Reserve(chunk * (o_.size + 1)));
    char* mine = static_cast<char*>(buffer_);
    char* all = mine + chunk;
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemsetAsync(mine, 0, chunk, stream_)));
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemcpyAsync(mine, data + ShardOffset(counts, o_.rank),
                                                   static_cast<size_t>(counts[o_.rank]) * 4,
                                                   cudaMemcpyHostToDevice, stream_)));
    HPOD_RETURN_IF_ERROR(
        Nccl(Cu().ncclAllGather(mine, all, static_cast<size_t>(per), ncclFloat, comm_, stream_),
             "allgather", o));
    int64_t off = 0;
    for (int r = 0; r < o_.size; ++r) {
      HPOD_RETURN_IF_ERROR(
          Cuda(Cu().cudaMemcpyAsync(data + off, all + chunk * r, static_cast<size_t>(counts[r]) * 4,
                                    cudaMemcpyDeviceToHost, stream_)));
      off += counts[r];
    }
    return Finish("allgather", o);
  }

  StatusOr<std::vector<std::string>> AllGatherBytes(const std::string& mine,
                                                    const CollectiveOptions& o) override {
    // Sizes first (as floats would lose precision: int64 words), then the
    // bytes padded to the largest.
    std::vector<int64_t> sizes(o_.size, 0);
    HPOD_RETURN_IF_ERROR(Reserve(16 * static_cast<size_t>(o_.size + 1)));
    const int64_t my_size = static_cast<int64_t>(mine.size());
    char* dev = static_cast<char*>(buffer_);
    HPOD_RETURN_IF_ERROR(
        Cuda(Cu().cudaMemcpyAsync(dev, &my_size, 8, cudaMemcpyHostToDevice, stream_)));
    HPOD_RETURN_IF_ERROR(
        Nccl(Cu().ncclAllGather(dev, dev + 8, 1, ncclInt64, comm_, stream_), "allgather", o));
    HPOD_RETURN_IF_ERROR(Cuda(
        Cu().cudaMemcpyAsync(sizes.data(), dev + 8, 8 * o_.size, cudaMemcpyDeviceToHost, stream_)));
    HPOD_RETURN_IF_ERROR(Finish("allgather", o));
    const int64_t per = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
    HPOD_RETURN_IF_ERROR(Reserve(static_cast<size_t>(per) * (o_.size + 1)));
    dev = static_cast<char*>(buffer_);
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemsetAsync(dev, 0, static_cast<size_t>(per), stream_)));
    HPOD_RETURN_IF_ERROR(
        Cuda(Cu().cudaMemcpyAsync(dev, mine.data(), mine.size(), cudaMemcpyHostToDevice, stream_)));
    HPOD_RETURN_IF_ERROR(Nccl(
        Cu().ncclAllGather(dev, dev + per, static_cast<size_t>(per), ncclUint8, comm_, stream_),
        "allgather", o));
    std::string all(static_cast<size_t>(per) * o_.size, '\0');
    HPOD_RETURN_IF_ERROR(Cuda(
        Cu().cudaMemcpyAsync(all.data(), dev + per, all.size(), cudaMemcpyDeviceToHost, stream_)));
    HPOD_RETURN_IF_ERROR(Finish("allgather", o));
    std::vector<std::string> out(o_.size);
    for (int r = 0; r < o_.size; ++r) out[r] = all.substr(static_cast<size_t>(r * per), sizes[r]);
    return out;
  }

  Status Broadcast(void* data, int64_t bytes, int root, const CollectiveOptions& o) override {
    if (bytes == 0) return OkStatus();
    HPOD_RETURN_IF_ERROR(Reserve(static_cast<size_t>(bytes)));
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemcpyAsync(buffer_, data, static_cast<size_t>(bytes),
                                                   cudaMemcpyHostToDevice, stream_)));
    HPOD_RETURN_IF_ERROR(Nccl(Cu().ncclBroadcast(buffer_, buffer_, static_cast<size_t>(bytes),
                                                 ncclUint8, root, comm_, stream_),
                              "broadcast", o));
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMemcpyAsync(data, buffer_, static_cast<size_t>(bytes),
                                                   cudaMemcpyDeviceToHost, stream_)));
    return Finish("broadcast", o);
  }

  Status Barrier(const CollectiveOptions& o) override {
    float one = 1.0f;
    return AllReduceSum(&one, 1, o);
  }

 private:
  Status CheckCounts(std::span<const int64_t> counts) const {
    if (static_cast<int>(counts.size()) != o_.size) {
      return InvalidArgumentError(
          fmt::format("{} counts for a world of {}", counts.size(), o_.size));
    }
    return OkStatus();
  }

  Status Reserve(size_t bytes) {
    if (bytes <= capacity_) return OkStatus();
    if (buffer_ != nullptr) Cu().cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    HPOD_RETURN_IF_ERROR(Cuda(Cu().cudaMalloc(&buffer_, bytes)));
    capacity_ = bytes;
    return OkStatus();
  }

  Status Cuda(cudaError_t e) const {
    if (e == cudaSuccess) return OkStatus();
    return InternalError(fmt::format("CUDA on device {}: {}", o_.device, CudaError(e)));
  }

  Status Nccl(ncclResult_t r, std::string_view op, const CollectiveOptions& o) const {
    if (r == ncclSuccess || r == ncclInProgress) return OkStatus();
    return UnavailableError(fmt::format("{} failed: {}", What(op, o), Cu().ncclGetErrorString(r)));
  }

  std::string What(std::string_view op, const CollectiveOptions& o) const {
    return o.what.empty() ? std::string(op) : fmt::format("{} of {}", op, o.what);
  }

  // Waits for the stream with the collective's deadline, watching NCCL's
  // asynchronous errors; a timeout aborts the communicator (NCCL has no
  // per-call timeout, so a dead peer would otherwise block forever).
  Status Finish(std::string_view op, const CollectiveOptions& o) {
    const auto timeout = o.timeout.count() > 0 ? o.timeout : o_.timeout;
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      cudaError_t q = Cu().cudaStreamQuery(stream_);
      if (q == cudaSuccess) return OkStatus();
      if (q != cudaErrorNotReady) return Cuda(q);
      ncclResult_t async = ncclSuccess;
      Cu().ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        Cu().ncclCommAbort(comm_);
        comm_ = nullptr;
        return UnavailableError(
            fmt::format("{} failed: {}", What(op, o), Cu().ncclGetErrorString(async)));
      }
      if (Clock::now() > deadline) {
        Cu().ncclCommAbort(comm_);
        comm_ = nullptr;
        return DeadlineExceededError(
            fmt::format("{} did not finish within {:g} s (a peer died "
                        "or hangs)",
                        What(op, o), timeout.count() / 1000.0));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  const NcclOptions o_;
  void* buffer_ = nullptr;  // device staging, grown on demand
  size_t capacity_ = 0;
};

}  // namespace

bool NcclCompiledIn() { return true; }

int CudaDeviceCount() {
  if (!Cu().ok) return 0;
  int n = 0;
  return Cu().cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

StatusOr<std::unique_ptr<Communicator>> ConnectNccl(Store& store, const NcclOptions& o) {
  if (!Cu().ok) {
    return FailedPreconditionError("--comm nccl: " + Cu().error +
                                   " (the CUDA runtime and NCCL must be installed on the node)");
  }
  const int devices = CudaDeviceCount();
  if (o.device < 0 || o.device >= devices) {
    return FailedPreconditionError(fmt::format(
        "rank {} wants CUDA device {}, this node has {} usable GPU(s)", o.rank, o.device, devices));
  }
  if (cudaError_t e = Cu().cudaSetDevice(o.device); e != cudaSuccess) {
    return FailedPreconditionError(
        fmt::format("Cu().cudaSetDevice({}): {}", o.device, CudaError(e)));
  }
  ncclUniqueId id;
  const std::string key = PrefixedKey(o.prefix, "nccl-id");
  if (o.rank == 0) {
    if (ncclResult_t r = Cu().ncclGetUniqueId(&id); r != ncclSuccess) {
      return UnavailableError(std::string("ncclGetUniqueId: ") + Cu().ncclGetErrorString(r));
    }
    HPOD_RETURN_IF_ERROR(store.Set(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    auto v = store.Get(key, o.timeout);
    if (!v.ok()) {
      return DeadlineExceededError("rank 0 never published NCCL's unique id: " +
                                   v.status().message());
    }
    if (v->size() != sizeof(id.internal)) return DataLossError("NCCL unique id of the wrong size");
    std::memcpy(id.internal, v->data(), sizeof(id.internal));
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = Cu().cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return InternalError("cudaStreamCreate: " + CudaError(e));
  }
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = Cu().ncclCommInitRank(&comm, o.size, id, o.rank); r != ncclSuccess) {
    Cu().cudaStreamDestroy(stream);
    return UnavailableError(fmt::format("ncclCommInitRank (rank {} of {}): {}", o.rank, o.size,
                                        Cu().ncclGetErrorString(r)));
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(comm, stream, o));
}

#endif  // HPOD_HAVE_NCCL

}  // namespace hpod::train::comm
