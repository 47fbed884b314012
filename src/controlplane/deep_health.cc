// Deep health checks: the records, the node concern's gate and the checker's
// loop (deep_health.h). A run itself is in deep_health_run.cc.

#include "hpod/controlplane/deep_health.h"

#include <spdlog/spdlog.h>

#include "hpod/api/states.h"

namespace hpod::controlplane {

using json = nlohmann::json;
using api::ClusterInstanceStatus;

std::string DeepCheckPrefix(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/deep-check/";
}

std::string DeepCheckSetting(const std::string& cluster_id, const std::string& instance_id) {
  return DeepCheckPrefix(cluster_id) + instance_id;
}

json DeepCheck::ToJson() const {
  return {{"checks", checks},
          {"state", state},
          {"origin", origin},
          {"run", run},
          {"requested", requested},
          {"started", started},
          {"finished", finished},
          {"message", message},
          {"results", results},
          {"attempts", attempts},
          {"unjudged", unjudged},
          {"retry_after", retry_after},
          {"waiting_since", waiting_since},
          {"fail_node", fail_node}};
}

namespace {

// A record's members, read without throwing on a wrong type (a hand-edited or
// older record gets the default).
std::string Str(const json& j, const char* key, const std::string& def = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}
double Num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

DeepCheck DeepCheck::FromJson(const std::string& instance_id, const json& j) {
  DeepCheck c;
  c.instance_id = instance_id;
  if (j.contains("checks") && j["checks"].is_array()) {
    for (const auto& x : j["checks"]) {
      if (x.is_string()) c.checks.push_back(x.get<std::string>());
    }
  }
  c.state = Str(j, "state", kDeepCheckRequested);
  c.origin = Str(j, "origin");
  c.run = Str(j, "run");
  c.requested = Num(j, "requested");
  c.started = Num(j, "started");
  c.finished = Num(j, "finished");
  c.message = Str(j, "message");
  c.attempts = static_cast<int>(Num(j, "attempts"));
  c.unjudged = static_cast<int>(Num(j, "unjudged"));
  c.retry_after = Num(j, "retry_after");
  c.waiting_since = Num(j, "waiting_since");
  c.fail_node =
      j.contains("fail_node") && j["fail_node"].is_boolean() && j["fail_node"].get<bool>();
  if (j.contains("results") && j["results"].is_object()) c.results = j["results"];
  return c;
}

StatusOr<std::map<std::string, DeepCheck>> LoadDeepChecks(store::ReadTx& tx,
                                                          const std::string& cluster_id) {
  const std::string prefix = DeepCheckPrefix(cluster_id);
  HPOD_ASSIGN_OR_RETURN(auto settings, tx.ListSettings(prefix));
  std::map<std::string, DeepCheck> out;
  for (const auto& [key, value] : settings) {
    json j = json::parse(value, nullptr, false);
    if (!j.is_object()) continue;
    const std::string id = key.substr(prefix.size());
    out.emplace(id, DeepCheck::FromJson(id, j));
  }
  return out;
}

Status PutDeepCheck(store::WriteTx& tx, const std::string& cluster_id, const DeepCheck& check) {
  return tx.PutSetting(DeepCheckSetting(cluster_id, check.instance_id), check.ToJson().dump());
}

std::vector<std::string> OnStartChecks(const store::GroupRecord& group) {
  std::vector<std::string> out;
  auto it = group.spec.find("OnStartDeepHealthChecks");
  if (it == group.spec.end() || !it->is_array()) return out;
  for (const auto& c : *it) {
    if (c.is_string()) out.push_back(c.get<std::string>());
  }
  return out;
}

namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void GateDeepChecks(const std::vector<store::GroupRecord>& groups,
                    const std::vector<store::NodeRecord>& nodes,
                    const std::map<std::string, DeepCheck>& checks,
                    std::vector<NodeChange>* changes) {
  std::map<std::string, const store::NodeRecord*> by_id;
  for (const auto& n : nodes) by_id[n.instance_id] = &n;
  std::map<std::string, const store::GroupRecord*> by_group;
  for (const auto& g : groups) by_group[g.name] = &g;
  for (NodeChange& c : *changes) {
    if (c.status != ClusterInstanceStatus::kRunning) continue;
    auto n = by_id.find(c.instance_id);
    if (n == by_id.end()) continue;
    auto check = checks.find(c.instance_id);
    if (check != checks.end()) {
      if (check->second.fail_node) {
        c.status = ClusterInstanceStatus::kFailure;
        c.message = check->second.message;
        continue;
      }
      if (!check->second.Active()) continue;
      c.status = ClusterInstanceStatus::kDeepHealthCheckInProgress;
      c.message = check->second.message.empty()
                      ? "Deep health checks " + Join(check->second.checks) + " are due"
                      : check->second.message;
      continue;
    }
    // A node that was Running before keeps running: OnStart checks are for new
    // nodes (a group's checks set by a later update apply to the nodes it adds).
    if (api::Is(n->second->status, ClusterInstanceStatus::kRunning)) continue;
    auto g = by_group.find(n->second->group_name);
    if (g == by_group.end()) continue;
    auto due = OnStartChecks(*g->second);
    if (due.empty()) continue;
    c.status = ClusterInstanceStatus::kDeepHealthCheckInProgress;
    c.message = "Deep health checks " + Join(due) +
                " are due before the node takes work (OnStartDeepHealthChecks)";
  }
}

DeepHealthChecker::DeepHealthChecker(store::Store& store, const Clock& clock,
                                     DeepHealthOptions options, RunFn run,
                                     std::function<void(const std::string&)> wake)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      run_(std::move(run)),
      wake_(std::move(wake)) {}

DeepHealthChecker::~DeepHealthChecker() { Stop(); }

void DeepHealthChecker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void DeepHealthChecker::RequestStop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void DeepHealthChecker::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

void DeepHealthChecker::Loop() {
  MutexLock lock(mu_);
  lock.WaitFor(cv_, options_.startup_grace, [this]() REQUIRES(mu_) { return stopping_; });
  while (!stopping_) {
    lock.Unlock();
    Status s = Pass();
    if (!s.ok()) spdlog::warn("deep health checks: {}", s.ToString());
    lock.Lock();
    lock.WaitFor(cv_, options_.poll, [this]() REQUIRES(mu_) { return stopping_; });
  }
}

Status DeepHealthChecker::Pass() {
  MutexLock pass(pass_mu_);
  std::vector<std::string> ids;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(ids, tx.ListClusterIds());
    return OkStatus();
  }));
  Status first = OkStatus();
  for (const auto& id : ids) {
    {
      MutexLock lock(mu_);
      if (stopping_) break;
    }
    Status s = RunCluster(id);
    if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) first = s;
  }
  return first;
}

}  // namespace hpod::controlplane
