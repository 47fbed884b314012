#pragma once

// hpod's read operations on node recoveries (src/api/hpod_extensions_model.json):
//   HpodDescribeRecovery → one recovery with its timeline (each step, its time
//                          and what was done);
//   HpodListRecoveries   → a cluster's recoveries, oldest first, optionally of
//                          one node (as the failed node or as its replacement).
// Both are read-only (any key may call them).
//
// Thread contract: free functions; the store is thread-safe.

#include <nlohmann/json.hpp>
#include <string>

#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

bool RecoveryApiHandles(const std::string& operation);
StatusOr<nlohmann::ordered_json> CallRecoveryApi(store::Store& store, const std::string& operation,
                                                 const nlohmann::json& request);

// The wire form of a record (the HpodRecovery shape).
nlohmann::ordered_json RenderRecovery(const store::RecoveryRecord& r);

}  // namespace hpod::controlplane
