// ClusterApi: UpdateClusterSoftware (software_update.h). The handler checks the
// request and records the update in one transaction, then wakes the cluster's
// reconciler, whose SoftwareUpdater replaces the nodes a batch at a time.

#include <spdlog/spdlog.h>

#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::string ClusterApi::ShippedImage() const {
  if (provider_ == nullptr) return "";
  auto image = provider_->CurrentImage();
  if (!image.ok()) {
    spdlog::warn("the provider could not name its software image: {}", image.status().ToString());
    return "";
  }
  return *image;
}

StatusOr<ordered_json> ClusterApi::UpdateClusterSoftware(const json& req) {
  // Named before the transaction: the provider may copy its programs first.
  std::string current_image;
  if (provider_ != nullptr) {
    HPOD_ASSIGN_OR_RETURN(current_image, provider_->CurrentImage());
  }
  auto has_image = [&](const std::string& id) {
    return provider_ != nullptr && provider_->HasImage(id);
  };
  std::string cluster_id, arn;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    arn = c.arn;
    return StartSoftwareUpdate(tx, clock_, c, req, current_image, has_image);
  }));
  wake_(cluster_id);
  return ordered_json{{"ClusterArn", arn}};
}

}  // namespace hpod::controlplane
