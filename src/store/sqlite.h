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
#include <unordered_map>

#include "hpod/base/status.h"

namespace hpod::store {

class Database;

class Statement {
 public:
  // `owner` (may be null) takes the statement back for its cache when this goes.
  Statement(sqlite3* db, sqlite3_stmt* stmt, Database* owner = nullptr)
      : db_(db), stmt_(stmt), owner_(owner) {}
  ~Statement();
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_), owner_(o.owner_) {
    o.stmt_ = nullptr;
  }
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
  Database* owner_;
};

class Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& path, int busy_timeout_ms);
  ~Database();

  Status Exec(std::string_view sql);
  // One statement through the cache of Prepare: for those run again and again,
  // as each transaction's BEGIN and COMMIT (Exec compiles its text every time:
  // a tenth of DescribeCluster's CPU, with three transactions a request).
  Status Run(std::string_view sql);
  // A statement for `sql`: a cached one when this text was prepared before and is
  // not in use now, else a new one. Compiling the same few statements again and
  // again took a fifth of a 5,000-node cluster's reconcile passes.
  StatusOr<Statement> Prepare(std::string_view sql);
  int64_t Changes() const { return sqlite3_changes64(db_); }
  // Rows inserted, updated or deleted on this connection since it opened,
  // triggers' included (sqlite3_total_changes64).
  int64_t TotalChanges() const { return sqlite3_total_changes64(db_); }
  sqlite3* raw() { return db_; }

 private:
  friend class Statement;
  explicit Database(sqlite3* db) : db_(db) {}
  // Takes back a statement that is done: reset, unbound and kept by its text
  // (at most kMaxCached; another of the same text, or one past that, is finalized).
  void Return(sqlite3_stmt* stmt);
  static constexpr size_t kMaxCached = 256;
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cached_;
};

// Converts an SQLite result code into a Status: SQLITE_BUSY/LOCKED → kUnavailable
// (retry), SQLITE_CONSTRAINT → kAlreadyExists, SQLITE_FULL/IOERR → kInternal.
Status SqliteError(sqlite3* db, int rc, std::string_view what);

}  // namespace hpod::store
