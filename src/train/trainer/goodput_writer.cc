#include "hpod/train/trainer/goodput_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hpod/base/file_util.h"

namespace hpod::train {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : 0;
}

}  // namespace

std::string GoodputLedgerPath(const TrainOptions& o) {
  if (o.goodput_file == "none") return "";
  if (!o.goodput_file.empty()) return o.goodput_file;
  if (std::string env = Env("HPOD_GOODPUT_FILE"); !env.empty()) return env;
  if (!o.checkpoint_dir.empty()) return o.checkpoint_dir + "/goodput.jsonl";
  return "";
}

GoodputStart GoodputStartFromEnv() {
  GoodputStart s;
  s.job_id = Env("SLURM_JOB_ID");
  s.restart = EnvInt("SLURM_RESTART_COUNT");
  s.attempt = EnvInt("HPOD_AUTO_RESUME_ATTEMPT");
  return s;
}

std::string_view GoodputEndName(GoodputEnd end) {
  switch (end) {
    case GoodputEnd::kCompleted:
      return "completed";
    case GoodputEnd::kInterrupted:
      return "interrupted";
    case GoodputEnd::kFailed:
      return "failed";
  }
  return "failed";
}

std::unique_ptr<GoodputWriter> GoodputWriter::Open(const std::string& path, const Clock& clock,
                                                   std::FILE* err) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(err, "hpod-train: warning: goodput ledger %s not written: %s\n", path.c_str(),
                 std::strerror(errno));
    return nullptr;
  }
  auto w = std::unique_ptr<GoodputWriter>(new GoodputWriter(path, fd, clock, err));
  struct stat st;
  char last = '\n';
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    // O_APPEND descriptors are write-only here; read the last byte apart.
    int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (rfd >= 0) {
      if (::pread(rfd, &last, 1, st.st_size - 1) != 1) last = '\n';
      ::close(rfd);
    }
  }
  if (last != '\n') w->Append("\n", 1);
  return w;
}

GoodputWriter::~GoodputWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void GoodputWriter::Append(const char* line, int n) {
  if (fd_ < 0 || n <= 0) return;
  ssize_t written;
  do {
    written = ::write(fd_, line, static_cast<size_t>(n));
  } while (written < 0 && errno == EINTR);
  if (written == n) return;
  // A short write leaves a torn line, which readers skip; writing on after a
  // full disk would leave a ledger with holes, which they could not tell.
  std::fprintf(err_,
               "hpod-train: warning: goodput ledger %s: write failed (%s); not written further\n",
               path_.c_str(), written < 0 ? std::strerror(errno) : "short write");
  ::close(fd_);
  fd_ = -1;
}

void GoodputWriter::Start(const GoodputStart& s) {
  if (started_) return;
  started_ = true;
  // The job id is the only string; dump() quotes and escapes it.
  const std::string job_id = nlohmann::json(s.job_id).dump();
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf),
                        "{\"event\":\"start\",\"time\":%.3f,\"process_start\":%.3f,\"job_id\":%s,"
                        "\"restart\":%d,\"attempt\":%d,\"world_size\":%d,\"resumed_step\":%lld,"
                        "\"checkpoint_load_s\":%.6f,\"rendezvous_s\":%.6f}\n",
                        clock_.NowEpochSeconds(), s.process_start,
                        job_id.size() < 200 ? job_id.c_str() : "\"\"", s.restart, s.attempt,
                        s.world_size, static_cast<long long>(s.resumed_step), s.checkpoint_load_s,
                        s.rendezvous_s);
  Append(buf, std::min<int>(n, sizeof(buf) - 1));
}

void GoodputWriter::Step(int64_t step, double step_s) {
  if (!started_) return;
  char buf[128];
  int n = std::snprintf(buf, sizeof(buf),
                        "{\"event\":\"step\",\"time\":%.3f,\"step\":%lld,\"step_s\":%.6f}\n",
                        clock_.NowEpochSeconds(), static_cast<long long>(step), step_s);
  Append(buf, std::min<int>(n, sizeof(buf) - 1));
}

void GoodputWriter::Checkpoint(int64_t step, double save_s) {
  if (!started_) return;
  char buf[128];
  int n = std::snprintf(buf, sizeof(buf),
                        "{\"event\":\"checkpoint\",\"time\":%.3f,\"step\":%lld,\"save_s\":%.6f}\n",
                        clock_.NowEpochSeconds(), static_cast<long long>(step), save_s);
  Append(buf, std::min<int>(n, sizeof(buf) - 1));
}

void GoodputWriter::End(int64_t step, GoodputEnd end) {
  if (!started_ || ended_) return;
  ended_ = true;
  char buf[128];
  const std::string_view status = GoodputEndName(end);
  int n = std::snprintf(buf, sizeof(buf),
                        "{\"event\":\"end\",\"time\":%.3f,\"step\":%lld,\"status\":\"%.*s\"}\n",
                        clock_.NowEpochSeconds(), static_cast<long long>(step),
                        static_cast<int>(status.size()), status.data());
  Append(buf, std::min<int>(n, sizeof(buf) - 1));
}

void GoodputWriter::PollSaves(const ckpt::AsyncCheckpointer& checkpointer) {
  // completed() copies the list under a lock: only while a save is unreported.
  if (saves_started_ <= static_cast<int64_t>(saves_reported_)) return;
  const auto done = checkpointer.completed();
  for (size_t i = saves_reported_; i < done.size(); ++i) {
    Checkpoint(done[i].step, done[i].snapshot_s + done[i].write_s);
  }
  saves_reported_ = std::max(saves_reported_, done.size());
}

StatusOr<goodput::Summary> GoodputWriter::Summarize() const {
  HPOD_ASSIGN_OR_RETURN(std::string text, ReadFile(path_));
  return goodput::Summarize(text);
}

}  // namespace hpod::train
