#pragma once

// Scheduled backups of a live store (`hpodd --backup-interval 6h --backup-keep 7`):
// every interval, BackupSqliteStore (backup.h) copies the store into a backup
// directory under a name that sorts by time, hpodd-20261206T102233Z.db, and the
// oldest of those beyond `keep` are deleted. A backup that fails (a full disk, a
// store locked past the busy timeout) is logged as one warning and taken again
// at the next interval; it never stops the daemon.
//
// Only files that match the schedule's own name pattern are counted or deleted:
// a copy an operator put beside them (`hpodd backup DIR/before-upgrade.db`) stays.
// Each backup is written under "<name>.partial" and linked to its name only once
// complete and checked, so a file with a backup's name is always a whole backup;
// a ".partial" left by a crash is removed by the next run (one hpodd per data
// dir: no other writer of these names can be running).
//
// Thread contract: RunOnce may be called from any one thread at a time; Start and
// Stop from the owner's thread (Start once; Stop is idempotent and joins the
// schedule's thread, which is the only caller of RunOnce while it runs).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::store {

struct BackupScheduleOptions {
  // The live store (<data-dir>/state.db).
  std::string store_path;
  // Where backups go; created (mode 0700: backups hold every secret of the
  // store) when missing.
  std::string dir;
  // Time between backups; zero: no schedule (Start does nothing).
  std::chrono::seconds interval{0};
  // How many scheduled backups to keep, newest first; at least 1.
  int keep = 7;
  // BackupSqliteStore's wait for a locked store.
  int busy_timeout_ms = 10000;
};

struct ScheduledBackup {
  std::string path;
  int64_t bytes = 0;
  int64_t elapsed_ms = 0;
  std::vector<std::string> pruned;  // backups deleted to stay within `keep`
};

class BackupSchedule {
 public:
  // The clock names each backup (its wall time, in UTC) and times it.
  BackupSchedule(BackupScheduleOptions options, const Clock& clock);
  ~BackupSchedule();  // Stop()s
  BackupSchedule(const BackupSchedule&) = delete;
  BackupSchedule& operator=(const BackupSchedule&) = delete;

  // The name a backup taken at `t` gets: "hpodd-YYYYMMDDTHHMMSSZ.db" (UTC).
  static std::string BackupName(std::chrono::system_clock::time_point t);
  // Whether `name` (a file name, no directory) is one BackupName could return.
  static bool IsBackupName(const std::string& name);

  // Takes one backup now, then deletes the oldest scheduled backups beyond
  // `keep`. The new backup is never deleted by its own run. Errors: those of
  // BackupSqliteStore (kAlreadyExists when a backup of this second exists, e.g.
  // after the clock stepped back), of creating the directory, or of listing or
  // deleting old backups (the new one is then complete and kept).
  StatusOr<ScheduledBackup> RunOnce();

  // Starts a thread that calls RunOnce every `interval` (the first one an
  // interval after Start), logging each backup (path, bytes, ms) or one warning
  // per failure. Does nothing when the interval is zero.
  void Start();
  // Wakes and joins the thread; a backup in progress finishes first.
  void Stop();

 private:
  void Loop();

  const BackupScheduleOptions options_;
  const Clock& clock_;
  std::thread thread_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace hpod::store
