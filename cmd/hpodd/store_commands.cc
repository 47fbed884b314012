#include "store_commands.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "hpod/base/duration.h"
#include "hpod/controlplane/daemon.h"
#include "hpod/controlplane/init.h"
#include "hpod/store/backup.h"

namespace hpod::cmd {

namespace fs = std::filesystem;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hpodd: error: %s\n", msg.c_str());
  return 1;
}

// One hpodd per data dir: a second one would adopt the first one's nodes, take
// over (and on exit remove) its agent socket, remove its guard route when it has
// no nodes, and reconcile the same clusters until its own API port fails to
// bind. An flock on <data-dir>/hpodd.lock, held until exit, keeps it out. The
// descriptor is close-on-exec: nodes, which outlive hpodd, must not hold it.
std::string LockDataDir(const std::string& data_dir) {
  const std::string path = (fs::path(data_dir) / "hpodd.lock").string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return "another hpodd" + (holder.empty() ? std::string() : " (pid " + holder + ")") +
           " serves data dir " + data_dir + " (it holds " + path + "); stop it first";
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    spdlog::warn("cannot write the pid into {}: {}", path, std::strerror(errno));
  }
  return "";  // fd stays open, and the lock held, until the process exits
}

int RunBackup(const std::string& data_dir, const std::string& file) {
  // A consistent snapshot through SQLite's backup API on its own connections
  // (store/backup.h): hpodd keeps serving, and its writes wait for nothing.
  std::string path = controlplane::StorePath(data_dir);
  if (!fs::exists(path)) return Fail("no store at " + path + "; run hpodd init");
  auto r = store::BackupSqliteStore(path, file);
  if (!r.ok()) return Fail(r.status().message());
  std::printf("Backed up %s to %s (%lld bytes, schema version %d)\n", path.c_str(), file.c_str(),
              static_cast<long long>(r->bytes), r->schema_version);
  return 0;
}

int RunRestore(const std::string& data_dir, const std::string& backup) {
  std::error_code ec;
  // Before anything is made: a mistyped path leaves no empty data dir behind.
  if (!fs::exists(backup, ec)) return Fail("no backup at " + backup);
  if (!fs::exists(data_dir, ec)) {
    // Made as `hpodd init` makes it: only the owner may read what holds secrets.
    fs::create_directories(data_dir, ec);
    if (ec) return Fail("cannot create data dir " + data_dir + ": " + ec.message());
    fs::permissions(data_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  // Held until exit: no hpodd can start on the data dir while the store is put
  // in place, and a running one is refused here rather than left under a new store.
  if (std::string busy = LockDataDir(data_dir); !busy.empty()) return Fail(busy);
  const std::string path = controlplane::StorePath(data_dir);
  auto r = store::RestoreSqliteStore(backup, path);
  if (!r.ok()) return Fail(r.status().message());
  std::printf("Restored %s to %s (%lld bytes, schema version %d)\n", backup.c_str(), path.c_str(),
              static_cast<long long>(r->bytes), r->schema_version);
  // The store is not all of a data dir (docs/operations.md, "Backup and
  // restore"): say what is missing rather than let hpodd start without it.
  if (!fs::exists(controlplane::TlsFiles(data_dir).ca_key, ec)) {
    std::printf(
        "Note: %s has no tls/ (hpodd's CA): copy it from the old data dir before hpodd serves "
        "TLS or agents join over the network; a new CA would lock out every client and host "
        "that trusts the old one\n",
        data_dir.c_str());
  }
  return 0;
}

Status ParseBackupFlags(const std::string& interval, const std::string& keep,
                        const std::string& dir, store::BackupScheduleOptions* out) {
  HPOD_ASSIGN_OR_RETURN(int64_t seconds,
                        ParseDurationSeconds("--backup-interval", interval, 0, 366 * 86400));
  int n = 0;
  auto [end, err] = std::from_chars(keep.data(), keep.data() + keep.size(), n);
  if (keep.empty() || err != std::errc() || end != keep.data() + keep.size() || n < 1) {
    return InvalidArgumentError("--backup-keep: \"" + keep +
                                "\" must be a whole number of at least 1");
  }
  out->interval = std::chrono::seconds(seconds);
  out->keep = n;
  out->dir = dir;
  return OkStatus();
}

}  // namespace hpod::cmd
