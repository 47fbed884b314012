#include "hpod/cli/logs.h"

namespace hpod::cli {

Status FollowNodeLogs(ApiClient& client, const LogsOptions& options, Sleeper& sleeper,
                      std::ostream& out) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodGetNodeLogs");
  if (op == nullptr) return InternalError("the model has no HpodGetNodeLogs operation");
  std::optional<std::string> token;
  for (int64_t calls = 0; !options.max_calls.has_value() || calls < *options.max_calls; ++calls) {
    Json request = {{"ClusterName", options.cluster_name}, {"NodeId", options.node_id}};
    if (options.stream.has_value()) request["Stream"] = *options.stream;
    if (token.has_value()) request["NextToken"] = *token;
    HPOD_ASSIGN_OR_RETURN(Json response, client.Call(*op, request));
    std::string data = response.value("Data", std::string());
    auto next = response.find("NextToken");
    if (next != response.end() && next->is_string() && !next->get<std::string>().empty()) {
      token = next->get<std::string>();
    }
    if (!data.empty()) {
      out << data << std::flush;
      // More may be waiting right away (the service caps one answer).
      if (token.has_value()) continue;
    }
    if (!options.follow) break;
    // Without a token there is no way to ask for only the new part, so a
    // follow that got none would print the log again and again.
    if (!token.has_value() && !data.empty()) break;
    if (options.max_calls.has_value() && calls + 1 >= *options.max_calls) break;
    sleeper.SleepFor(options.poll_interval);
  }
  return OkStatus();
}

}  // namespace hpod::cli
