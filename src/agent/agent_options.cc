#include "hpod/agent/agent_options.h"

#include <cstdint>
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

Status ReadInt(const Json& doc, const char* name, int64_t min, int64_t max, int64_t* out) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < min || it->get<int64_t>() > max) {
    return InvalidArgumentError(std::string("agent config: \"") + name + "\" must be an integer " +
                                std::to_string(min) + ".." + std::to_string(max));
  }
  *out = it->get<int64_t>();
  return OkStatus();
}

Status ReadBool(const Json& doc, const char* name, bool* out) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return OkStatus();
  if (!it->is_boolean()) {
    return InvalidArgumentError(std::string("agent config: \"") + name +
                                "\" must be true or false");
  }
  *out = it->get<bool>();
  return OkStatus();
}

Status ReadHealth(const Json& doc, health::HealthOptions* h) {
  int64_t interval = h->interval.count(), timeout = h->timeout.count();
  int64_t bytes = static_cast<int64_t>(h->min_free_bytes);
  int64_t inodes = static_cast<int64_t>(h->min_free_inodes);
  int64_t temp = h->gpu_max_temperature_c;
  HPOD_RETURN_IF_ERROR(ReadInt(doc, "health_interval_ms", 0, 3600000, &interval));
  HPOD_RETURN_IF_ERROR(ReadInt(doc, "health_timeout_ms", 1, 3600000, &timeout));
  HPOD_RETURN_IF_ERROR(ReadInt(doc, "health_min_free_bytes", 0, INT64_MAX, &bytes));
  HPOD_RETURN_IF_ERROR(ReadInt(doc, "health_min_free_inodes", 0, INT64_MAX, &inodes));
  HPOD_RETURN_IF_ERROR(ReadInt(doc, "health_gpu_max_temperature_c", 1, 200, &temp));
  h->interval = std::chrono::milliseconds(interval);
  h->timeout = std::chrono::milliseconds(timeout);
  h->min_free_bytes = static_cast<uint64_t>(bytes);
  h->min_free_inodes = static_cast<uint64_t>(inodes);
  h->gpu_max_temperature_c = static_cast<unsigned int>(temp);
  HPOD_RETURN_IF_ERROR(ReadString(doc, "health_flag_file", false, &h->flag_file));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "health_kernel_log", false, &h->kernel_log));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "health_nvml_library", false, &h->nvml_library));
  if (auto it = doc.find("health_disk_paths"); it != doc.end() && !it->is_null()) {
    const char* bad = "agent config: \"health_disk_paths\" must be an array of absolute paths";
    if (!it->is_array()) return InvalidArgumentError(bad);
    h->disk_paths.clear();
    for (const auto& p : *it) {
      if (!p.is_string() || p.get<std::string>().empty() || p.get<std::string>()[0] != '/') {
        return InvalidArgumentError(bad);
      }
      h->disk_paths.push_back(p.get<std::string>());
    }
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
  HPOD_RETURN_IF_ERROR(ReadString(doc, "join_token", false, &options.join_token));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "machine_id_file", false, &options.machine_id_file));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "state_dir", true, &options.state_dir));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "hostname", false, &options.hostname));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "private_ip", false, &options.private_ip));
  HPOD_RETURN_IF_ERROR(ReadString(doc, "local_socket", false, &options.local_socket));
  HPOD_RETURN_IF_ERROR(ReadBool(doc, "systemctl", &options.systemctl));
  HPOD_RETURN_IF_ERROR(ReadHealth(doc, &options.health));
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
