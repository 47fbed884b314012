// `hpodd backup`: SQLite's online backup API from the live store into a fresh
// file that is linked into place only once it is complete and checked.

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "hpod/base/file_util.h"
#include "hpod/store/backup.h"
#include "hpod/store/sqlite.h"
#include "hpod/store/sqlite_store_internal.h"

namespace hpod::store {
namespace {

// Closes a raw connection on every return path.
struct Connection {
  sqlite3* db = nullptr;
  ~Connection() { sqlite3_close_v2(db); }
};

Status OpenConnection(const std::string& path, int flags, int busy_timeout_ms, Connection* c) {
  int rc = sqlite3_open_v2(path.c_str(), &c->db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return SqliteError(c->db, rc, "opening " + path);
  sqlite3_busy_timeout(c->db, busy_timeout_ms);
  sqlite3_extended_result_codes(c->db, 1);
  return OkStatus();
}

// The first column of the first row of `sql`, as text.
StatusOr<std::string> QueryText(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, sql);
  rc = sqlite3_step(st);
  std::string out;
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(st, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqliteError(db, rc, sql);
  return out;
}

Status FsyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening " + path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? OkStatus() : ErrnoStatus(err, "fsync " + path);
}

// Copies every page of `src`'s main database into `dst` in one step: one read
// snapshot, so the copy is consistent. A WAL reader blocks no writer; BUSY
// comes only from a checkpoint or recovery in progress, so it is retried until
// the deadline.
Status CopyPages(sqlite3* src, sqlite3* dst, const std::string& store_path, int busy_timeout_ms) {
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == nullptr) return SqliteError(dst, sqlite3_errcode(dst), "starting backup");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  int rc;
  while (true) {
    rc = sqlite3_backup_step(b, -1);
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sqlite3_backup_finish(b);
  if (rc == SQLITE_DONE) return OkStatus();
  return SqliteError(nullptr, rc, "copying " + store_path);
}

Status WriteCopy(const std::string& store_path, const std::string& partial, int busy_timeout_ms,
                 BackupResult* result) {
  Connection src, dst;
  // READWRITE without CREATE: a missing store is an error, never a new empty
  // one; query_only keeps this connection from writing it.
  HPOD_RETURN_IF_ERROR(OpenConnection(store_path, SQLITE_OPEN_READWRITE, busy_timeout_ms, &src));
  HPOD_RETURN_IF_ERROR(QueryText(src.db, "PRAGMA query_only=ON").status());
  HPOD_RETURN_IF_ERROR(OpenConnection(partial, SQLITE_OPEN_READWRITE, busy_timeout_ms, &dst));
  HPOD_RETURN_IF_ERROR(CopyPages(src.db, dst.db, store_path, busy_timeout_ms));
  HPOD_ASSIGN_OR_RETURN(std::string mode, QueryText(dst.db, "PRAGMA journal_mode=DELETE"));
  if (mode != "delete") {
    return InternalError("backup of " + store_path + ": journal_mode stayed " + mode);
  }
  HPOD_ASSIGN_OR_RETURN(std::string check, QueryText(dst.db, "PRAGMA quick_check"));
  if (check != "ok") {
    return InternalError("backup of " + store_path + " failed its check: " + check);
  }
  HPOD_ASSIGN_OR_RETURN(std::string version, QueryText(dst.db, "PRAGMA user_version"));
  result->schema_version = std::atoi(version.c_str());
  return OkStatus();
}

void RemovePartial(const std::string& partial) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((partial + suffix).c_str());
}

// Whether `backup_path` is an hpod store this hpodd can open: an SQLite file
// with a schema version hpodd wrote (1 to the latest) and hpod's tables.
Status CheckIsHpodStore(const std::string& backup_path) {
  Connection c;
  HPOD_RETURN_IF_ERROR(OpenConnection(backup_path, SQLITE_OPEN_READONLY, 1000, &c));
  auto not_hpod = [&](const std::string& why) {
    return InvalidArgumentError(backup_path + " is not an hpod store (" + why + ")");
  };
  StatusOr<std::string> version = QueryText(c.db, "PRAGMA user_version");
  if (!version.ok()) return not_hpod(std::string(version.status().message()));
  StatusOr<std::string> tables =
      QueryText(c.db,
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                "('clusters','nodes','access_keys')");
  if (!tables.ok()) return not_hpod(std::string(tables.status().message()));
  const int v = std::atoi(version->c_str());
  if (v <= 0 || *tables != "3") {
    return not_hpod("schema version " + *version + ", " + *tables + " of hpod's tables");
  }
  if (v > internal::LatestSchemaVersion()) {
    return FailedPreconditionError(backup_path + " has store schema version " + *version +
                                   ", newer than this hpodd understands (" +
                                   std::to_string(internal::LatestSchemaVersion()) +
                                   "); restore it with the hpodd that wrote it");
  }
  return OkStatus();
}

}  // namespace

StatusOr<BackupResult> RestoreSqliteStore(const std::string& backup_path,
                                          const std::string& store_path) {
  struct stat st;
  if (::stat(backup_path.c_str(), &st) != 0) return ErrnoStatus(errno, "backup " + backup_path);
  // An old store's WAL beside a restored file would be replayed into it.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string p = store_path + suffix;
    if (::lstat(p.c_str(), &st) == 0) {
      return AlreadyExistsError(p +
                                " exists; move the old store (and its -wal, -shm) away "
                                "first: restore never overwrites a store");
    }
  }
  HPOD_RETURN_IF_ERROR(CheckIsHpodStore(backup_path));
  return BackupSqliteStore(backup_path, store_path);
}

StatusOr<BackupResult> BackupSqliteStore(const std::string& store_path,
                                         const std::string& dest_path, int busy_timeout_ms) {
  struct stat st;
  if (::stat(store_path.c_str(), &st) != 0) return ErrnoStatus(errno, "store " + store_path);
  if (::lstat(dest_path.c_str(), &st) == 0) {
    return AlreadyExistsError(dest_path + " already exists; refusing to overwrite it");
  }
  // The partial copy is created here, 0600 from its first byte (SQLite would
  // create it with the umask's mode), and O_EXCL: a leftover from a crashed run
  // is reported, never silently reused.
  const std::string partial = dest_path + ".partial";
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus(errno, "creating " + partial + " (remove it if a backup was cut short)");
  }
  int rc = ::fchmod(fd, 0600);  // the umask may have narrowed it; never widened
  int err = errno;
  ::close(fd);
  if (rc != 0) {
    ::unlink(partial.c_str());
    return ErrnoStatus(err, "chmod " + partial);
  }
  BackupResult result;
  Status s = WriteCopy(store_path, partial, busy_timeout_ms, &result);
  if (s.ok()) s = FsyncPath(partial, O_RDONLY);
  // link(2) fails with EEXIST instead of replacing: a file that appeared at
  // dest_path meanwhile is never overwritten.
  if (s.ok() && ::link(partial.c_str(), dest_path.c_str()) != 0) {
    s = errno == EEXIST
            ? AlreadyExistsError(dest_path + " already exists; refusing to overwrite it")
            : ErrnoStatus(errno, "linking " + partial + " to " + dest_path);
  }
  RemovePartial(partial);
  if (!s.ok()) return s;
  std::string dir = std::filesystem::path(dest_path).parent_path().string();
  HPOD_RETURN_IF_ERROR(FsyncPath(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY));
  if (::stat(dest_path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat " + dest_path);
  result.bytes = st.st_size;
  return result;
}

}  // namespace hpod::store
