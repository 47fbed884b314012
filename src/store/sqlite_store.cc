// SQLite implementation of the Store: WAL mode, STRICT tables, schema migrations
// keyed by PRAGMA user_version, one connection serialized by a mutex.

#include <atomic>
#include <condition_variable>
#include <exception>
#include <vector>

#include "hpod/base/thread_annotations.h"
#include "hpod/store/sqlite.h"
#include "hpod/store/sqlite_store_internal.h"
#include "hpod/store/store.h"

namespace hpod::store {
namespace {

using internal::SqliteTx;

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}

  Status Migrate() {
    MutexLock lock(mu_);
    return internal::MigrateSchema(*db_);
  }

  Status Write(const std::function<Status(WriteTx&)>& fn) override {
    MutexLock lock(mu_);
    const int64_t changes = db_->TotalChanges();
    Status s = RunTx(*db_, "BEGIN IMMEDIATE", [&](SqliteTx& tx) { return fn(tx); });
    // After the COMMIT (or ROLLBACK) returned, so a reader that sees the new
    // number sees the data. Only when a row changed: most of a running
    // cluster's write transactions are reconcile passes that find nothing to do
    // (20 a second with 100 clusters), and each would start a new generation.
    // A rolled-back transaction that changed rows moves it too (harmless).
    if (db_->TotalChanges() != changes) generation_.fetch_add(1, std::memory_order_release);
    return s;
  }

  uint64_t WriteGeneration() const override { return generation_.load(std::memory_order_acquire); }

  Status Read(const std::function<Status(ReadTx&)>& fn) override {
    if (readers_.empty()) {
      MutexLock lock(mu_);
      return RunTx(*db_, "BEGIN DEFERRED", [&](SqliteTx& tx) { return fn(tx); });
    }
    // WAL lets readers see a consistent snapshot without blocking the writer or
    // each other, so a large DescribeCluster never stalls a reconciler's write.
    Database* reader = nullptr;
    {
      MutexLock lock(pool_mu_);
      lock.Wait(pool_cv_, [&]() REQUIRES(pool_mu_) { return !free_readers_.empty(); });
      reader = free_readers_.back();
      free_readers_.pop_back();
    }
    Status s = RunTx(*reader, "BEGIN DEFERRED", [&](SqliteTx& tx) { return fn(tx); });
    {
      MutexLock lock(pool_mu_);
      free_readers_.push_back(reader);
    }
    pool_cv_.notify_one();
    return s;
  }

  // Opens `n` read-only connections to `path` for concurrent reads. Called once,
  // before the store is shared; the pool lock is taken only to satisfy the analysis.
  Status OpenReaders(const std::string& path, int n, int busy_timeout_ms) EXCLUDES(pool_mu_) {
    for (int i = 0; i < n; ++i) {
      HPOD_ASSIGN_OR_RETURN(auto db, Database::Open(path, busy_timeout_ms));
      HPOD_RETURN_IF_ERROR(db->Exec("PRAGMA query_only=ON"));
      {
        MutexLock lock(pool_mu_);
        free_readers_.push_back(db.get());
      }
      readers_.push_back(std::move(db));
    }
    return OkStatus();
  }

  int SchemaVersion() override {
    MutexLock lock(mu_);
    auto v = internal::ReadSchemaVersion(*db_);
    return v.ok() ? *v : -1;
  }

 private:
  template <typename Fn>
  static Status RunTx(Database& db, const char* begin, Fn fn) {
    HPOD_RETURN_IF_ERROR(db.Run(begin));
    SqliteTx tx(db);
    Status s;
    // A callback that throws must not leave the connection inside a transaction:
    // every later call would fail. Roll back and report it as internal.
    try {
      s = fn(tx);
    } catch (const std::exception& e) {
      s = InternalError(std::string("store transaction aborted by exception: ") + e.what());
    }
    if (s.ok()) s = db.Run("COMMIT");
    if (!s.ok()) (void)db.Run("ROLLBACK");
    return s;
  }

  Mutex mu_;
  std::unique_ptr<Database> db_ GUARDED_BY(mu_);  // the one writer
  std::atomic<uint64_t> generation_{0};           // WriteGeneration()
  // Read-only connections (file stores only); each is used by one Read at a time.
  // Filled by OpenReaders before the store is shared, constant afterwards.
  std::vector<std::unique_ptr<Database>> readers_;
  Mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<Database*> free_readers_ GUARDED_BY(pool_mu_);
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options) {
  HPOD_ASSIGN_OR_RETURN(auto db, Database::Open(options.path, options.busy_timeout_ms));
  auto store = std::make_unique<SqliteStore>(std::move(db));
  HPOD_RETURN_IF_ERROR(store->Migrate());
  if (options.path != ":memory:" && !options.path.empty() && options.reader_connections > 0) {
    HPOD_RETURN_IF_ERROR(
        store->OpenReaders(options.path, options.reader_connections, options.busy_timeout_ms));
  }
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace hpod::store
