#include "hpod/cli/recovery.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <vector>

namespace hpod::cli {

using nlohmann::ordered_json;

StatusOr<ordered_json> FetchRecovery(ApiClient& client, const DescribeRecoveryOptions& o) {
  const api::ServiceModel& model = api::ServiceModel::Get();
  if (!o.recovery_id.empty()) {
    const api::Operation* op = model.FindOperation("HpodDescribeRecovery");
    if (op == nullptr) return InternalError("the model has no HpodDescribeRecovery operation");
    HPOD_ASSIGN_OR_RETURN(
        auto r, client.Call(*op, {{"ClusterName", o.cluster_name}, {"RecoveryId", o.recovery_id}}));
    return ordered_json(r.value("Recovery", ordered_json::object()));
  }
  const api::Operation* op = model.FindOperation("HpodListRecoveries");
  if (op == nullptr) return InternalError("the model has no HpodListRecoveries operation");
  HPOD_ASSIGN_OR_RETURN(auto r,
                        client.Call(*op, {{"ClusterName", o.cluster_name}, {"NodeId", o.node_id}}));
  auto list = r.value("Recoveries", ordered_json::array());
  if (list.empty()) {
    return NotFoundError("node " + o.node_id + " of cluster " + o.cluster_name +
                         " has no recovery (hpod hpod-list-recoveries --cluster-name " +
                         o.cluster_name + " lists them all)");
  }
  return ordered_json(list.back());
}

namespace {

std::string Clock(double t) {
  std::time_t s = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03d", static_cast<int>((t - static_cast<double>(s)) * 1000));
  return std::string(buf) + ms;
}

std::string Secs(double d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", d);
  return buf;
}

// A timestamp as the client renders it ("2026-12-01T17:03:30.709000+00:00", the
// AWS CLI's form) or as epoch seconds; 0 when neither.
double Epoch(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number()) return it->get<double>();
  if (!it->is_string()) return 0;
  const std::string text = it->get<std::string>();
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  double frac = 0;
  if (*rest == '.') frac = std::strtod(rest, nullptr);  // ".709000" -> 0.709
  return static_cast<double>(timegm(&tm)) + frac;
}

std::string Str(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_boolean()) return it->get<bool>() ? "true" : "false";
  return it->dump();
}

}  // namespace

std::string FormatRecovery(const ordered_json& r, OutputFormat format) {
  if (format == OutputFormat::kJson) return FormatJson(ordered_json{{"Recovery", r}});
  std::ostringstream out;
  const bool table = format == OutputFormat::kTable;
  std::vector<std::pair<std::string, std::string>> summary = {
      {"RecoveryId", Str(r, "RecoveryId")},
      {"Status", Str(r, "Status")},
      {"Action", Str(r, "Action")},
      {"Node", Str(r, "NodeId")},
      {"Replacement", Str(r, "ReplacementNodeId")},
      {"Hostname", Str(r, "Hostname") + " (" + Str(r, "PrivateIpAddress") + ")"},
      {"Source", Str(r, "Source") + " / " + Str(r, "Check")},
      {"Reason", Str(r, "Reason")},
      {"Message", Str(r, "Message")}};
  double start = Epoch(r, "CreatedTime");
  double end = Epoch(r, "FinishedTime");
  if (end > 0) summary.push_back({"Total", Secs(end - start) + " s"});
  struct Row {
    std::string step, time, since, took, detail;
  };
  std::vector<Row> rows;
  double prev = start;
  auto timeline = r.find("Timeline");
  for (const auto& s :
       timeline != r.end() && timeline->is_array() ? *timeline : ordered_json::array()) {
    double t = Epoch(s, "Time");
    rows.push_back({Str(s, "Step"), Clock(t), Secs(t - start), Secs(t - prev), Str(s, "Detail")});
    prev = t;
  }
  if (!table) {
    for (const auto& [k, v] : summary) {
      if (!v.empty() && v != " ()" && v != " / ") out << k << "\t" << v << "\n";
    }
    for (const auto& row : rows) {
      out << "STEP\t" << row.step << "\t" << row.time << "\t" << row.since << "\t" << row.took
          << "\t" << row.detail << "\n";
    }
    return out.str();
  }
  size_t key_w = 0;
  for (const auto& [k, v] : summary) key_w = std::max(key_w, k.size());
  for (const auto& [k, v] : summary) {
    if (v.empty() || v == " ()" || v == " / ") continue;
    out << "  " << k << std::string(key_w - k.size() + 2, ' ') << v << "\n";
  }
  Row head{"Step", "Time (UTC)", "+s", "took s", "Detail"};
  size_t w[4] = {head.step.size(), head.time.size(), head.since.size(), head.took.size()};
  for (const auto& row : rows) {
    w[0] = std::max(w[0], row.step.size());
    w[1] = std::max(w[1], row.time.size());
    w[2] = std::max(w[2], row.since.size());
    w[3] = std::max(w[3], row.took.size());
  }
  auto line = [&](const Row& row) {
    out << "  " << row.step << std::string(w[0] - row.step.size() + 2, ' ') << row.time
        << std::string(w[1] - row.time.size() + 2, ' ') << std::string(w[2] - row.since.size(), ' ')
        << row.since << "  " << std::string(w[3] - row.took.size(), ' ') << row.took << "  "
        << row.detail << "\n";
  };
  out << "\n";
  line(head);
  for (const auto& row : rows) line(row);
  return out.str();
}

Status DescribeRecovery(ApiClient& client, const DescribeRecoveryOptions& options,
                        std::ostream& out) {
  HPOD_ASSIGN_OR_RETURN(ordered_json r, FetchRecovery(client, options));
  out << FormatRecovery(r, options.format) << std::flush;
  return OkStatus();
}

}  // namespace hpod::cli
