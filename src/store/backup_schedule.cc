#include "hpod/store/backup_schedule.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <ctime>
#include <filesystem>

#include "hpod/base/file_util.h"
#include "hpod/store/backup.h"

namespace hpod::store {
namespace {

namespace fs = std::filesystem;

constexpr char kPrefix[] = "hpodd-";
constexpr char kSuffix[] = ".db";
constexpr char kPartial[] = ".partial";
// "20261206T102233Z"
constexpr size_t kStampSize = 16;

// The scheduled backups in `dir`, oldest first (their names sort by time), and
// the leftovers of runs cut short ("<backup name>.partial", with any -journal).
Status ListBackups(const std::string& dir, std::vector<std::string>* backups,
                   std::vector<std::string>* leftovers) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (BackupSchedule::IsBackupName(name)) {
      backups->push_back(name);
      continue;
    }
    const size_t partial = name.find(kPartial);
    if (partial != std::string::npos && BackupSchedule::IsBackupName(name.substr(0, partial))) {
      leftovers->push_back(name);
    }
  }
  if (ec) return ErrnoStatus(ec.value(), "listing " + dir);
  std::sort(backups->begin(), backups->end());
  return OkStatus();
}

}  // namespace

BackupSchedule::BackupSchedule(BackupScheduleOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

BackupSchedule::~BackupSchedule() { Stop(); }

std::string BackupSchedule::BackupName(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  return std::string(kPrefix) + stamp + kSuffix;
}

bool BackupSchedule::IsBackupName(const std::string& name) {
  const size_t prefix = sizeof(kPrefix) - 1, suffix = sizeof(kSuffix) - 1;
  if (name.size() != prefix + kStampSize + suffix) return false;
  if (name.compare(0, prefix, kPrefix) != 0) return false;
  if (name.compare(prefix + kStampSize, suffix, kSuffix) != 0) return false;
  const std::string stamp = name.substr(prefix, kStampSize);
  for (size_t i = 0; i < kStampSize; ++i) {
    const char c = stamp[i];
    const bool ok = i == 8 ? c == 'T' : i == 15 ? c == 'Z' : std::isdigit(c) != 0;
    if (!ok) return false;
  }
  return true;
}

StatusOr<ScheduledBackup> BackupSchedule::RunOnce() {
  const auto started = clock_.SteadyNow();
  std::error_code ec;
  if (!fs::exists(options_.dir, ec)) {
    // 0700 from the start: the backups hold every access key's secret.
    if (::mkdir(options_.dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "creating backup directory " + options_.dir);
    }
  }
  std::vector<std::string> before, leftovers;
  HPOD_RETURN_IF_ERROR(ListBackups(options_.dir, &before, &leftovers));
  // Only this schedule writes these names, and only one hpodd serves a data
  // dir, so a ".partial" here is from a run that was cut short.
  for (const std::string& name : leftovers) fs::remove(fs::path(options_.dir) / name, ec);

  ScheduledBackup out;
  const std::string name = BackupName(clock_.Now());
  out.path = (fs::path(options_.dir) / name).string();
  HPOD_ASSIGN_OR_RETURN(BackupResult copy,
                        BackupSqliteStore(options_.store_path, out.path, options_.busy_timeout_ms));
  out.bytes = copy.bytes;
  out.elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.SteadyNow() - started).count();

  // Prune only after the new backup is complete: a failed run never leaves
  // fewer backups than it found.
  std::vector<std::string> all = before;
  all.push_back(name);
  std::sort(all.begin(), all.end());
  const size_t keep = static_cast<size_t>(std::max(options_.keep, 1));
  for (size_t i = 0; i + keep < all.size(); ++i) {
    if (all[i] == name) continue;  // a clock stepped back: keep what was just taken
    const fs::path old = fs::path(options_.dir) / all[i];
    if (!fs::remove(old, ec) && ec) {
      return ErrnoStatus(ec.value(), "deleting old backup " + old.string());
    }
    out.pruned.push_back(old.string());
  }
  return out;
}

void BackupSchedule::Start() {
  if (options_.interval.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void BackupSchedule::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackupSchedule::Loop() {
  MutexLock lock(mu_);
  while (true) {
    if (lock.WaitFor(cv_, options_.interval, [this]() REQUIRES(mu_) { return stopping_; })) {
      return;
    }
    lock.Unlock();
    StatusOr<ScheduledBackup> b = RunOnce();
    if (b.ok()) {
      spdlog::info("backup: wrote {} ({} bytes, {} ms){}", b->path, b->bytes, b->elapsed_ms,
                   b->pruned.empty()
                       ? ""
                       : "; deleted " + std::to_string(b->pruned.size()) +
                             " older beyond --backup-keep " + std::to_string(options_.keep));
    } else {
      // The daemon keeps serving: the next interval tries again.
      spdlog::warn("backup into {} failed (next try in {} s): {}", options_.dir,
                   options_.interval.count(), b.status().ToString());
    }
    lock.Lock();
  }
}

}  // namespace hpod::store
