#pragma once

// The HTTP face of the cluster API: authenticates (SigV4 against the store's
// access keys), authorizes by role, decodes and validates the request against
// the model, calls ClusterApi, and writes the AWS JSON 1.1 response or error.
// Nothing a client sends can crash it or leave a partial write: decoding happens
// before any store access and each operation is one transaction.
//
// Thread contract: Handle() is safe for concurrent calls.

#include <atomic>
#include <string>

#include "hpod/auth/sigv4.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/host_api.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/node_api.h"
#include "hpod/http/message.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct ApiServerOptions {
  // Skip SigV4 and treat every caller as admin. For development only.
  bool insecure_no_auth = false;
  // Scope requests must be signed for; empty region accepts any region.
  std::string region;
  std::chrono::seconds max_clock_skew{900};
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
  class StoreSecrets : public auth::SecretLookup {
   public:
    explicit StoreSecrets(store::Store& store) : store_(store) {}
    StatusOr<std::string> SecretFor(std::string_view access_key_id) const override;

   private:
    store::Store& store_;
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
  StoreSecrets secrets_;
  Metrics* const metrics_;
  HostApi* hosts_ = nullptr;
};

}  // namespace hpod::controlplane
