#include "hpod/cli/job_goodput.h"

#include <cstdio>
#include <sstream>

namespace hpod::cli {
namespace {

using nlohmann::ordered_json;

double Num(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : -1;
}

// "1.23 s", or "-" when the response does not have it (no ledger, no resume).
std::string Secs(const ordered_json& j, const char* key) {
  double v = Num(j, key);
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", v);
  return buf;
}

std::string Str(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string FormatJobGoodput(const ordered_json& r, OutputFormat format) {
  if (format == OutputFormat::kJson) return FormatJson(r);
  std::ostringstream out;
  const ordered_json g = r.value("Goodput", ordered_json::object());
  const bool table = format == OutputFormat::kTable;
  const std::string sep = table ? "  " : "\t";
  char line[256];
  std::snprintf(line, sizeof(line), "%d attempt(s), %s", static_cast<int>(Num(r, "Attempts")),
                r.value("Finished", false) ? "finished" : "still running");
  out << "Job" << sep << Str(r, "JobId") << ": " << line << "\n";
  if (g.empty() && r.value("Finished", false)) {
    out << "Goodput" << sep
        << "no ledger: the program wrote none (hpod-train does; a Python script adds "
           "one with hpod_goodput); the timings below are the supervisor's and the "
           "recoveries'\n";
  } else if (g.empty()) {
    out << "Goodput" << sep
        << "no ledger yet (hpod-train's rank 0 writes it, the supervisor "
           "reports it when the step ends)\n";
  } else {
    std::snprintf(line, sizeof(line),
                  "%.1f %% (useful step time %.1f s of %.1f s wall), %lld step(s) re-run, "
                  "final step %lld",
                  100 * Num(g, "goodput"), Num(g, "useful_step_s"), Num(g, "wall_s"),
                  static_cast<long long>(Num(g, "steps_rerun")),
                  static_cast<long long>(Num(g, "final_step")));
    out << "Goodput" << sep << line << "\n";
  }
  const ordered_json failures = r.value("Failures", ordered_json::array());
  if (failures.empty()) {
    out << "Failures" << sep << "none\n";
    return out.str();
  }
  const char* cols[] = {"Hostname",   "Action",    "Detection", "Replacement", "Restart",
                        "Rendezvous", "Ckpt load", "1st step",  "Re-run",      "Recovery"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : failures) {
    rows.push_back({Str(f, "Hostname"), Str(f, "Action"), Secs(f, "DetectionSeconds"),
                    Secs(f, "ReplacementSeconds"), Secs(f, "RestartSeconds"),
                    Secs(f, "RendezvousSeconds"), Secs(f, "CheckpointLoadSeconds"),
                    Secs(f, "FirstStepSeconds"),
                    Num(f, "StepsRerun") < 0 ? "-" : Str(f, "StepsRerun"), Str(f, "RecoveryId")});
  }
  if (!table) {
    for (const auto& row : rows) {
      out << "FAILURE";
      for (const auto& c : row) out << "\t" << c;
      out << "\n";
    }
    return out.str();
  }
  std::vector<size_t> w;
  for (const char* c : cols) w.push_back(std::string(c).size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  out << "\n";
  auto print = [&](const std::vector<std::string>& row) {
    out << " ";
    for (size_t i = 0; i < row.size(); ++i) {
      out << " " << row[i] << std::string(w[i] - row[i].size(), ' ');
    }
    out << "\n";
  };
  print(std::vector<std::string>(std::begin(cols), std::end(cols)));
  for (const auto& row : rows) print(row);
  return out.str();
}

Status DescribeJobGoodput(ApiClient& client, const DescribeJobGoodputOptions& o,
                          std::ostream& out) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation("HpodDescribeJobGoodput");
  if (op == nullptr) return InternalError("the model has no HpodDescribeJobGoodput operation");
  HPOD_ASSIGN_OR_RETURN(auto r,
                        client.Call(*op, {{"ClusterName", o.cluster_name}, {"JobId", o.job_id}}));
  out << FormatJobGoodput(r, o.format) << std::flush;
  return OkStatus();
}

}  // namespace hpod::cli
