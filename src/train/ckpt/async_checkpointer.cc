#include <spdlog/spdlog.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include "hpod/train/ckpt/checkpoint.h"

namespace hpod::train::ckpt {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The staging buffer grows in huge-page multiples (transparent huge pages make its
// one-time first touch ~30x cheaper on this VM: training-building-blocks.md §4).
constexpr int64_t kStagingGranule = 2 << 20;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// The layout of tensors.bin for `tensors`, or InvalidArgument naming the bad view.
StatusOr<std::vector<TensorLayout>> ComputeLayout(std::span<const TensorView> tensors,
                                                  int64_t* file_bytes) {
  std::vector<TensorLayout> layout;
  layout.reserve(tensors.size());
  std::set<std::string_view> names;
  int64_t offset = kHeaderBytes;
  for (const TensorView& t : tensors) {
    if (t.name.empty() || !names.insert(t.name).second) {
      return InvalidArgumentError("checkpoint tensor name \"" + t.name + "\" is empty or repeated");
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return InvalidArgumentError("tensor " + t.name + ": negative dimension");
      numel *= d;
    }
    if (numel != t.numel) {
      return InvalidArgumentError("tensor " + t.name + ": numel " + std::to_string(t.numel) +
                                  " != product(shape) " + std::to_string(numel));
    }
    if (t.numel > 0 && t.data == nullptr) {
      return InvalidArgumentError("tensor " + t.name + ": null data");
    }
    offset = AlignUp(offset, kTensorAlignment);
    layout.push_back({t.name, t.shape, offset, t.numel * 4});
    offset += t.numel * 4;
  }
  *file_bytes = offset;
  return layout;
}

}  // namespace

int64_t AsyncCheckpointer::FileBytes(std::span<const TensorView> tensors) {
  int64_t offset = kHeaderBytes;
  for (const TensorView& t : tensors) offset = AlignUp(offset, kTensorAlignment) + t.numel * 4;
  return offset;
}

StatusOr<std::unique_ptr<AsyncCheckpointer>> AsyncCheckpointer::Create(
    std::string dir, CheckpointerOptions options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return FailedPreconditionError("checkpoint directory " + dir + ": " +
                                   (ec ? ec.message() : "not a directory"));
  }
  if (!options.sharding || options.sharding->rank == 0) {
    HPOD_RETURN_IF_ERROR(RemoveStaleTemps(dir));
  }
  return std::unique_ptr<AsyncCheckpointer>(
      new AsyncCheckpointer(std::move(dir), std::move(options)));
}

AsyncCheckpointer::AsyncCheckpointer(std::string dir, CheckpointerOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  writer_ = std::thread(&AsyncCheckpointer::WriterLoop, this);
}

AsyncCheckpointer::~AsyncCheckpointer() {
  Status s = Close();
  if (!s.ok()) spdlog::error("checkpointer closed with an unreported error: {}", s.ToString());
}

Status AsyncCheckpointer::GrowStaging(int64_t bytes) {
  if (bytes <= staging_capacity_) return OkStatus();
  const int64_t capacity = AlignUp(bytes, kStagingGranule);
  void* p = mmap(nullptr, static_cast<size_t>(capacity), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhaustedError("checkpoint staging buffer of " + std::to_string(capacity) +
                                  " bytes: " + std::strerror(errno));
  }
  madvise(p, static_cast<size_t>(capacity), MADV_HUGEPAGE);  // advisory; fine if refused
  std::memset(p, 0, static_cast<size_t>(capacity));          // first touch, once
  if (staging_ != nullptr) munmap(staging_, static_cast<size_t>(staging_capacity_));
  staging_ = static_cast<char*>(p);
  staging_capacity_ = capacity;
  return OkStatus();
}

Status AsyncCheckpointer::Reserve(int64_t bytes) {
  if (closed_) return FailedPreconditionError("checkpointer is closed");
  {
    MutexLock lk(mu_);
    lk.Wait(cv_, [&]() REQUIRES(mu_) { return !busy_; });
  }
  return GrowStaging(bytes);
}

StatusOr<SaveStats> AsyncCheckpointer::Save(int64_t step, const nlohmann::json& meta,
                                            std::span<const TensorView> tensors) {
  const auto t0 = Clock::now();
  if (closed_) return FailedPreconditionError("checkpointer is closed");
  if (step < 0) return InvalidArgumentError("checkpoint step must be >= 0");
  {
    // At most one save in flight: the staging buffer is the writer's until it is done.
    MutexLock lk(mu_);
    lk.Wait(cv_, [&]() REQUIRES(mu_) { return !busy_; });
    if (!error_.ok()) {
      Status e = std::move(error_);
      error_ = OkStatus();
      return e;
    }
  }
  int64_t file_bytes = 0;
  HPOD_ASSIGN_OR_RETURN(std::vector<TensorLayout> layout, ComputeLayout(tensors, &file_bytes));
  HPOD_RETURN_IF_ERROR(GrowStaging(file_bytes));

  const auto t1 = Clock::now();
  EncodeHeader(step, static_cast<uint32_t>(layout.size()), file_bytes, staging_);
  for (size_t i = 0; i < layout.size(); ++i) {
    const TensorLayout& l = layout[i];
    if (l.nbytes > 0)
      std::memcpy(staging_ + l.offset, tensors[i].data, static_cast<size_t>(l.nbytes));
    // Padding must be zero on disk, and the buffer may hold an earlier layout's bytes.
    const int64_t end = l.offset + l.nbytes;
    const int64_t next = i + 1 < layout.size() ? layout[i + 1].offset : file_bytes;
    if (next > end) std::memset(staging_ + end, 0, static_cast<size_t>(next - end));
  }
  if (!layout.empty() && layout[0].offset > kHeaderBytes) {
    std::memset(staging_ + kHeaderBytes, 0, static_cast<size_t>(layout[0].offset - kHeaderBytes));
  }
  const auto t2 = Clock::now();

  SaveStats stats;
  stats.step = step;
  stats.bytes = file_bytes;
  stats.snapshot_s = Seconds(t2 - t1);
  {
    MutexLock lk(mu_);
    job_.step = step;
    job_.meta = meta;
    job_.layout = std::move(layout);
    job_.file_bytes = file_bytes;
    busy_ = true;
    stats.stall_s = Seconds(Clock::now() - t0);
    job_.stats = stats;
  }
  cv_.notify_all();
  return stats;
}

Status AsyncCheckpointer::Wait() {
  MutexLock lk(mu_);
  lk.Wait(cv_, [&]() REQUIRES(mu_) { return !busy_; });
  Status e = std::move(error_);
  error_ = OkStatus();
  return e;
}

Status AsyncCheckpointer::Close() {
  if (closed_) return OkStatus();
  Status s = Wait();
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
  closed_ = true;
  if (staging_ != nullptr) munmap(staging_, static_cast<size_t>(staging_capacity_));
  staging_ = nullptr;
  staging_capacity_ = 0;
  return s;
}

std::vector<SaveStats> AsyncCheckpointer::completed() const {
  MutexLock lk(mu_);
  return completed_;
}

void AsyncCheckpointer::WriterLoop() {
  MutexLock lk(mu_);
  while (true) {
    lk.Wait(cv_, [&]() REQUIRES(mu_) { return busy_ || stop_; });
    if (!busy_) return;  // stop_ and nothing in flight
    // While busy_, the job and the staging buffer are this thread's; the training
    // thread only waits for busy_ to clear. The job is moved out under the lock so
    // nothing reads job_ without it.
    Job job = std::move(job_);
    lk.Unlock();
    if (options_.before_write_hook) options_.before_write_hook(job.step);
    const auto t0 = Clock::now();
    Status s = options_.sharding ? CommitPart(dir_, job.step, job.meta, job.layout, staging_,
                                              job.file_bytes, options_.fsync, *options_.sharding)
                                 : CommitCheckpoint(dir_, job.step, job.meta, job.layout, staging_,
                                                    job.file_bytes, options_.fsync);
    const double write_s = Seconds(Clock::now() - t0);
    if (s.ok() && (!options_.sharding || options_.sharding->rank == 0)) {
      // The new checkpoint is durable; failing to delete old ones loses nothing, so it
      // is logged rather than reported as a failed save.
      Status p = PruneCheckpoints(dir_, options_.keep_last, job.step);
      if (!p.ok()) spdlog::warn("pruning old checkpoints in {}: {}", dir_, p.ToString());
    }
    lk.Lock();
    if (s.ok()) {
      job.stats.write_s = write_s;
      completed_.push_back(job.stats);
    } else if (error_.ok()) {
      error_ = s.Annotate("saving checkpoint step " + std::to_string(job.step));
    }
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace hpod::train::ckpt
