#include "hpod/agent/agent_options.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hpod::agent {
namespace {

using Json = nlohmann::json;

Status ReadString(const Json& doc, const char* name, bool required, std::string* out) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) {
    if (required)
      return InvalidArgumentError(std::string("agent config: missing \"") + name + "\"");
    return OkStatus();
  }
  if (!it->is_string()) {
    return InvalidArgumentError(std::string("agent config: \"") + name + "\" must be a string");
  }
  *out = it->get<std::string>();
  if (required && out->empty()) {
    return InvalidArgumentError(std::string("agent config: \"") + name + "\" is empty");
  }
  return OkStatus();
}

}  // namespace

StatusOr<AgentOptions> ParseAgentConfig(std::string_view json_text) {
  Json doc = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError("agent config: not valid JSON");
  if (!doc.is_object()) return InvalidArgumentError("agent config: not a JSON object");
  AgentOptions options;
  HPOD_RETURN_IF_ERROR(ReadString(doc, "instance_id", true, &options.instance_id));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "cluster_id", false, &options.cluster_id));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "endpoint", true, &options.endpoint));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "bootstrap_token", false, &options.bootstrap_token));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "state_dir", true, &options.state_dir));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "hostname", false, &options.hostname));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "private_ip", false, &options.private_ip));
  if (options.endpoint.rfind("unix:///", 0) != 0 && options.endpoint.rfind("http://", 0) != 0 &&
      options.endpoint.rfind("https://", 0) != 0) {
    return InvalidArgumentError(
        "agent config: \"endpoint\" must start with unix:/// or http:// or https://");
  }
  if (options.state_dir.front() != '/') {
    return InvalidArgumentError("agent config: \"state_dir\" must be an absolute path");
  }
  return options;
}

StatusOr<AgentOptions> LoadAgentConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError("agent config: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = ParseAgentConfig(text.str());
  if (!parsed.ok()) return parsed.status().Annotate(path);
  return parsed;
}

}  // namespace hpod::agent
