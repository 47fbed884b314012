#pragma once

// A consistent copy of a live SQLite store (`hpodd backup`), taken while hpodd
// keeps serving: SQLite's online backup API copies the pages of one read
// snapshot (WAL readers never block the writer, and the writer never blocks
// them), so the copy holds every transaction committed before it began and none
// of one still open. Pages are copied as they are, rowids included, which
// VACUUM INTO would not promise (ReadTx::ListRecoveriesWrittenAfter relies on
// them).
//
// `hpodd restore` is the way back: the same copy, from a backup into the place
// of a store that does not exist yet, after checking that the backup is an hpod
// store this hpodd can open.
//
// Thread contract: free functions, safe from any thread and any process while
// the store is in use; they open their own connections.

#include <cstdint>
#include <string>

#include "hpod/base/status.h"

namespace hpod::store {

struct BackupResult {
  int64_t bytes = 0;       // size of the copy
  int schema_version = 0;  // PRAGMA user_version of the copy
};

// Copies the store at `store_path` to `dest_path`, which must not exist
// (kAlreadyExists: nothing is overwritten, not even by a racing writer). The
// copy is written under "<dest_path>.partial", checked (PRAGMA quick_check),
// switched to a rollback journal so it is one self-contained file (hpodd puts a
// store back into WAL mode when it opens it), fsynced, made mode 0600 (it holds
// every access key's secret, as SigV4 needs, and the settings' secrets), and then linked to
// `dest_path`, so `dest_path` is either absent or complete. kNotFound when
// `store_path` does not exist; kUnavailable when the store stayed locked past
// `busy_timeout_ms` (retry).
StatusOr<BackupResult> BackupSqliteStore(const std::string& store_path,
                                         const std::string& dest_path, int busy_timeout_ms = 10000);

// Puts the backup at `backup_path` in place as the store `store_path`, as
// BackupSqliteStore copies (checked, one file, mode 0600, linked only when
// complete); hpodd migrates it when it opens it, if it is older. Nothing is
// overwritten: kAlreadyExists when `store_path`, or a "-wal" or "-shm" of an old
// store, exists (move it away first). kInvalidArgument when the backup is not an
// hpod store (not SQLite, or no hpod schema); kFailedPrecondition when its schema
// is newer than this hpodd understands; kNotFound when it does not exist.
StatusOr<BackupResult> RestoreSqliteStore(const std::string& backup_path,
                                          const std::string& store_path);

}  // namespace hpod::store
