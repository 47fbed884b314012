#include "hpod/controlplane/daemon.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpod/base/crypto.h"

namespace hpod::controlplane {

std::string StorePath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "state.db").string();
}

namespace {

// The pagination secret lives in the store so tokens survive restarts.
StatusOr<std::string> PageSecret(store::Store& store) {
  std::string secret;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
    auto s = tx.GetSetting("page_token_secret");
    if (s.ok()) {
      secret = *s;
      return OkStatus();
    }
    if (s.status().code() != StatusCode::kNotFound) return s.status();
    secret = HexEncode(RandomBytes(32));
    return tx.PutSetting("page_token_secret", secret);
  }));
  return secret;
}

}  // namespace

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options,
                                                std::unique_ptr<provider::Provider> provider,
                                                const Clock& clock) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->options_ = options;
  d->clock_ = &clock;
  std::string path = StorePath(options.data_dir);
  if (!std::filesystem::exists(path)) {
    return FailedPreconditionError("no hpod store at " + path + "; run `hpodd init --data-dir " +
                                   options.data_dir + "` first");
  }
  HPOD_ASSIGN_OR_RETURN(d->store_, store::OpenSqliteStore({path}));
  HPOD_ASSIGN_OR_RETURN(std::string secret, PageSecret(*d->store_));
  d->provider_ = std::move(provider);
  d->reconciler_ = std::make_unique<ClusterReconciler>(*d->store_, d->provider_.get(), clock,
                                                       options.control_plane);
  WorkQueueOptions qo;
  qo.workers = options.reconcile_workers;
  Daemon* self = d.get();
  d->queue_ = std::make_unique<WorkQueue>(
      clock, qo, [self](const std::string& key) { return self->reconciler_->Reconcile(key); });
  d->api_ =
      std::make_unique<ClusterApi>(*d->store_, clock, options.control_plane, PageTokenCodec(secret),
                                   [self](const std::string& id) { self->queue_->Add(id); });
  ApiServerOptions ao;
  ao.insecure_no_auth = options.insecure_no_auth;
  d->api_server_ = std::make_unique<ApiServer>(*d->store_, *d->api_, clock, ao);
  d->queue_->Start();
  d->resync_ = std::thread([self] { self->ResyncLoop(); });
  HPOD_ASSIGN_OR_RETURN(d->server_, http::Server::Start(options.http, [self](const auto& r) {
                          return self->api_server_->Handle(r);
                        }));
  spdlog::info("hpodd serving the SageMaker cluster API on {}:{} (auth: {})", options.http.address,
               d->server_->port(),
               options.insecure_no_auth ? "DISABLED (--insecure-no-auth)" : "SigV4");
  return d;
}

void Daemon::ResyncLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    std::vector<std::string> ids;
    Status s = store_->Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(ids, tx.ListClusterIds());
      return OkStatus();
    });
    if (!s.ok()) spdlog::warn("resync: {}", s.ToString());
    for (const auto& id : ids) queue_->Add(id);
    lock.lock();
    cv_.wait_for(lock, options_.control_plane.resync_interval, [this] { return stopping_; });
  }
}

void Daemon::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (server_) server_->Shutdown(grace);
  if (resync_.joinable()) resync_.join();
  if (queue_) queue_->Stop();
  spdlog::info("hpodd stopped");
}

Daemon::~Daemon() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace hpod::controlplane
