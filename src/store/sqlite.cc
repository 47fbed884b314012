#include "hpod/store/sqlite.h"

#include <memory>
#include <mutex>

namespace hpod::store {

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return AlreadyExistsError(msg);
    default:
      return InternalError(msg);
  }
}

Statement& Statement::Bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Statement& Statement::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, "sqlite step");
}

Status Statement::Run() {
  while (true) {
    HPOD_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return OkStatus();
  }
}

std::string Statement::Text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  if (t == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(t),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path, int busy_timeout_ms) {
  // SQLite counts its memory under one process-wide mutex at every malloc and
  // free unless told not to; hpod never asks for the figures, and with two
  // threads reading at once the mutex was a tenth of a DescribeCluster's waits.
  // Settable only before SQLite initializes (the first open): later it fails,
  // harmlessly, and the counting stays on.
  static std::once_flag configured;
  std::call_once(configured, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(db, rc, "opening " + path);
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, busy_timeout_ms);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Database>(new Database(db));
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (owner_ != nullptr) {
    owner_->Return(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
}

Database::~Database() {
  for (auto& [sql, stmt] : cached_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

void Database::Return(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);  // ends its read of the database too
  sqlite3_clear_bindings(stmt);
  const char* text = sqlite3_sql(stmt);
  if (text == nullptr || cached_.size() >= kMaxCached || !cached_.emplace(text, stmt).second) {
    sqlite3_finalize(stmt);
  }
}

Status Database::Exec(std::string_view sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return SqliteError(nullptr, rc, "sqlite exec: " + msg);
  }
  return OkStatus();
}

Status Database::Run(std::string_view sql) {
  HPOD_ASSIGN_OR_RETURN(Statement s, Prepare(sql));
  return s.Run();
}

StatusOr<Statement> Database::Prepare(std::string_view sql) {
  if (auto it = cached_.find(std::string(sql)); it != cached_.end()) {
    sqlite3_stmt* stmt = it->second;
    cached_.erase(it);  // in use until the Statement returns it
    return Statement(db_, stmt, this);
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "sqlite prepare");
  return Statement(db_, stmt, this);
}

}  // namespace hpod::store
