#pragma once

// The SageMaker cluster operations. A handler validates semantics the model
// cannot express (unique group names, supported features, state preconditions),
// writes the user's desired state in one store transaction, and wakes the
// cluster's reconciler; it never changes anything at a provider (it only asks
// whether the nodes can see a file:// lifecycle source). Requests arrive already
// decoded and validated against the model (api/codec.h).
//
// Thread contract: safe for concurrent calls (all state lives in the Store).

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "hpod/api/model.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/pagination.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class ClusterApi {
 public:
  // `wake` is called with a cluster id after a handler changed that cluster.
  // `provider` (may be null) says which file:// lifecycle sources its nodes
  // cannot see (CheckLifecycleSourceVisible).
  ClusterApi(store::Store& store, const Clock& clock, const ControlPlaneOptions& options,
             PageTokenCodec tokens, std::function<void(const std::string&)> wake,
             const provider::Provider* provider = nullptr);

  // Runs `operation` on a validated request; the result is the response body.
  StatusOr<nlohmann::ordered_json> Call(const api::Operation& operation,
                                        const nlohmann::json& request);

  // Operations allowed to `user` keys: those that change nothing, and opening a
  // shell session on a node.
  static bool IsReadOnly(const std::string& operation);
  // Operations whose successful answer is a function of the request, the
  // store's contents and ShippedImage() only: no clock, no agent's live state,
  // nothing random. ApiServer keeps their bodies while the store is unchanged
  // (response_cache.h); an operation added here must stay that kind.
  static bool AnswersFromStoreOnly(const std::string& operation);
  // The provider's current image (Provider::CurrentImage) for new groups; "" when
  // it ships none or could not say (logged: the nodes then get what it has).
  std::string ShippedImage() const;

  // Resolves a ClusterNameOrArn member; kNotFound in SageMaker's words.
  static StatusOr<store::ClusterRecord> FindCluster(store::ReadTx& tx,
                                                    const std::string& name_or_arn);
  // FindCluster, else a deleted cluster still kept for its events and logs
  // (store::DeletedClusterRecord): by its ARN, or by name (the one deleted last)
  // when no live cluster has that name. The record has id, name, arn,
  // failure_message and creation_time only. For the read operations that serve
  // a deleted cluster's history: events and node logs.
  static StatusOr<store::ClusterRecord> FindClusterOrDeleted(store::ReadTx& tx,
                                                             const std::string& name_or_arn);

 private:
  using Result = StatusOr<nlohmann::ordered_json>;
  Result CreateCluster(const nlohmann::json& req);
  Result UpdateCluster(const nlohmann::json& req);
  Result DeleteCluster(const nlohmann::json& req);
  Result DescribeCluster(const nlohmann::json& req);
  Result ListClusters(const nlohmann::json& req);
  Result ListClusterNodes(const nlohmann::json& req);
  Result DescribeClusterNode(const nlohmann::json& req);
  Result BatchDeleteClusterNodes(const nlohmann::json& req);
  // Both in cluster_api_recovery.cc: one RecoveryRecord per accepted node.
  Result BatchRebootClusterNodes(const nlohmann::json& req);
  Result BatchReplaceClusterNodes(const nlohmann::json& req);
  Result BatchRecoverClusterNodes(const nlohmann::json& req, const std::string& operation);
  // cluster_api_add.cc: continuous provisioning's scaling call.
  Result BatchAddClusterNodes(const nlohmann::json& req);
  // cluster_api_health.cc: deep health checks on Running nodes (deep_health.h).
  Result StartClusterHealthCheck(const nlohmann::json& req);
  Result ListClusterEvents(const nlohmann::json& req);
  Result DescribeClusterEvent(const nlohmann::json& req);
  // cluster_api_software.cc: rolling software updates (software_update.h).
  Result UpdateClusterSoftware(const nlohmann::json& req);
  // cluster_api_tags.cc: a cluster's Tags, by its ARN.
  Result AddTags(const nlohmann::json& req);
  Result ListTags(const nlohmann::json& req);
  Result DeleteTags(const nlohmann::json& req);

  // For a NotFound about a deleted cluster still kept: when it was deleted, until
  // when its history is readable, how, and why it had failed; "" otherwise.
  std::string DeletedHint(store::ReadTx& tx, const std::string& name_or_arn) const;

  store::Store& store_;
  const Clock& clock_;
  const ControlPlaneOptions options_;
  const PageTokenCodec tokens_;
  const std::function<void(const std::string&)> wake_;
  const provider::Provider* const provider_;
};

// Refuses request members hpod stores but cannot honour yet, naming the field
// and why (a field is never silently ignored). `path` prefixes member names.
Status CheckSupportedClusterFields(const nlohmann::json& req);
Status CheckSupportedGroupFields(const nlohmann::json& group, const std::string& path);
// A TagList's rules beyond the model's: unique keys, none beginning with
// "aws:" (reserved). kInvalidArgument naming the key.
Status CheckTags(const nlohmann::json& tags);
// A file:// lifecycle source under a directory the provider's nodes have their
// own of (a host path they cannot see) is a ValidationException naming the group,
// the path and what to do, instead of a node failing minutes later with "No
// objects found".
Status CheckLifecycleSourceVisible(const nlohmann::json& group, const std::string& path,
                                   const provider::Provider& provider);

}  // namespace hpod::controlplane
