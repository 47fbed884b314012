#pragma once

// hpodd's commands on its data dir and store, beside the flag parsing in
// hpodd_main.cc: the data dir's lock, `hpodd backup`, `hpodd restore`, and the
// scheduled backups' flags.
//
// Thread contract: called from main's thread, before the daemon starts.

#include <string>

#include "hpod/base/status.h"
#include "hpod/store/backup_schedule.h"

namespace hpod::cmd {

// Prints "hpodd: error: <msg>" to stderr; returns the exit status 1.
int Fail(const std::string& msg);

// Takes the flock on <data-dir>/hpodd.lock that keeps a second hpodd (or a
// restore) off a data dir one hpodd serves, held until the process exits.
// Returns an error message, or "" when the lock is ours.
std::string LockDataDir(const std::string& data_dir);

// `hpodd backup FILE` and `hpodd restore BACKUP`: their exit status, having
// printed what they did or one error line.
int RunBackup(const std::string& data_dir, const std::string& file);
int RunRestore(const std::string& data_dir, const std::string& backup);

// --backup-interval, --backup-keep and --backup-dir into `out` (its interval,
// keep and dir). kInvalidArgument naming the flag, e.g. `--backup-keep: "0"
// must be a whole number of at least 1`.
Status ParseBackupFlags(const std::string& interval, const std::string& keep,
                        const std::string& dir, store::BackupScheduleOptions* out);

}  // namespace hpod::cmd
