#pragma once

// The HTTP face of the cluster API: authenticates (SigV4 against the store's
// access keys), authorizes by role, decodes and validates the request against
// the model, calls ClusterApi, and writes the AWS JSON 1.1 response or error.
// Nothing a client sends can crash it or leave a partial write: decoding happens
// before any store access and each operation is one transaction.
//
// Thread contract: Handle() is safe for concurrent calls.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hpod/auth/signing_key_cache.h"
#include "hpod/auth/sigv4.h"
#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/host_api.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/node_api.h"
#include "hpod/controlplane/response_cache.h"
#include "hpod/http/message.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct ApiServerOptions {
  // Skip SigV4 and treat every caller as admin. For development only.
  bool insecure_no_auth = false;
  // Scope requests must be signed for; empty region accepts any region.
  std::string region;
  std::chrono::seconds max_clock_skew{900};
  // Bound of the read answers' cache (response_cache.h); 0 turns it off.
  size_t response_cache_bytes = ResponseCache::kDefaultMaxBytes;
};

class ApiServer {
 public:
  // `node_api` serves hpod's own Hpod* operations, except HpodGetCallerIdentity
  // ({AccessKeyId, Role} of the signing key, for any valid key), answered here
  // because only this class knows who called.
  // `metrics` (may be null) counts every request by operation and status
  // (metrics.h); it must outlive the server.
  ApiServer(store::Store& store, ClusterApi& api, NodeApi& node_api, const Clock& clock,
            ApiServerOptions options, Metrics* metrics = nullptr);

  http::Response Handle(const http::Request& request);

  // Join tokens and hosts (host_api.h); without one, those operations answer
  // that this hpodd has no agent network listener. Set before serving.
  void SetHostApi(HostApi* hosts) { hosts_ = hosts; }

 private:
  // Access keys read lately, by id. A key's record never changes once written
  // (CreateAccessKey makes a new id each time, and nothing deletes one), yet each
  // request read it in a transaction of its own: a tenth of a DescribeCluster's
  // CPU. Found keys are kept kTtl, which bounds how long one would still work
  // were keys ever deleted; unknown ids are not kept (another process may add
  // one at any time). At most kMaxKeys; when full it starts afresh.
  // Thread contract: thread-safe.
  class KeyCache {
   public:
    static constexpr std::chrono::seconds kTtl{5};
    static constexpr size_t kMaxKeys = 1024;
    std::optional<store::AccessKeyRecord> Find(std::string_view access_key_id,
                                               std::chrono::steady_clock::time_point now) const;
    void Put(const store::AccessKeyRecord& key, std::chrono::steady_clock::time_point now);

   private:
    struct Entry {
      store::AccessKeyRecord key;
      std::chrono::steady_clock::time_point read;
    };
    mutable Mutex mu_;
    std::map<std::string, Entry, std::less<>> keys_ GUARDED_BY(mu_);
  };

  // One request's lookup: finds the key's record once and keeps it, so the role
  // comes with the secret.
  // Thread contract: one per request, on the thread that serves it.
  class StoreSecrets : public auth::SecretLookup {
   public:
    StoreSecrets(store::Store& store, KeyCache& cache, const Clock& clock)
        : store_(store), cache_(cache), clock_(clock) {}
    StatusOr<std::string> SecretFor(std::string_view access_key_id) const override;
    // The record SecretFor found; none before, or when it found none.
    const std::optional<store::AccessKeyRecord>& found() const { return found_; }

   private:
    store::Store& store_;
    KeyCache& cache_;
    const Clock& clock_;
    mutable std::optional<store::AccessKeyRecord> found_;
  };

  struct Identity {
    store::Role role = store::Role::kUser;
    std::string access_key_id;
  };
  // Returns who called, or an auth error.
  StatusOr<Identity> Authenticate(const http::Request& request);
  // Handle without the metrics.
  http::Response Serve(const http::Request& request);

  store::Store& store_;
  ClusterApi& api_;
  NodeApi& node_api_;
  const Clock& clock_;
  const ApiServerOptions options_;
  // Signing keys derived from the secrets, by scope (thread-safe).
  auth::SigningKeyCache signing_keys_;
  KeyCache keys_;
  // Bodies of ClusterApi::AnswersFromStoreOnly answers (thread-safe).
  ResponseCache responses_;
  Metrics* const metrics_;
  HostApi* hosts_ = nullptr;
};

}  // namespace hpod::controlplane
