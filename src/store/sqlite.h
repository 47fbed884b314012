#pragma once

// A thin RAII layer over the SQLite C API that reports errors as Status (SQLiteCpp
// throws, and no exception may cross our library boundaries).
//
// Thread contract: not thread-safe; the owner serializes access.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::store {

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds are 1-based, like SQLite's.
  Statement& Bind(int i, std::string_view v);
  Statement& Bind(int i, int64_t v);
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Statement& Bind(int i, double v);
  Statement& BindNull(int i);
  template <typename T>
  Statement& Bind(int i, const std::optional<T>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }

  // True when a row is available, false when done.
  StatusOr<bool> Step();
  // Runs to completion (for statements without result rows).
  Status Run();

  std::string Text(int col) const;
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& path, int busy_timeout_ms);
  ~Database();

  Status Exec(std::string_view sql);
  StatusOr<Statement> Prepare(std::string_view sql);
  int64_t Changes() const { return sqlite3_changes64(db_); }
  sqlite3* raw() { return db_; }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// Converts an SQLite result code into a Status: SQLITE_BUSY/LOCKED → kUnavailable
// (retry), SQLITE_CONSTRAINT → kAlreadyExists, SQLITE_FULL/IOERR → kInternal.
Status SqliteError(sqlite3* db, int rc, std::string_view what);

}  // namespace hpod::store
