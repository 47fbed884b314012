#pragma once

// A consistent copy of a live SQLite store (`hpodd backup`), taken while hpodd
// keeps serving: SQLite's online backup API copies the pages of one read
// snapshot (WAL readers never block the writer, and the writer never blocks
// them), so the copy holds every transaction committed before it began and none
// of one still open. Pages are copied as they are, rowids included, which
// VACUUM INTO would not promise (ReadTx::ListRecoveriesWrittenAfter relies on
// them).
//
// Thread contract: a free function, safe from any thread and any process while
// the store is in use; it opens its own connections.

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

}  // namespace hpod::store
