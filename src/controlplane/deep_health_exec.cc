#include "hpod/controlplane/deep_health_exec.h"

#include <thread>

namespace hpod::controlplane::deep {

namespace {

using json = nlohmann::json;

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The last line of a command's output, for a message.
std::string LastLine(const CommandResult& r) {
  std::string text = !r.stderr_data.empty() ? r.stderr_data : r.stdout_data;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kInconclusive:
      return "inconclusive";
    case Outcome::kUnavailable:
      return "unavailable";
  }
  return "inconclusive";
}

CheckResult Classify(const StatusOr<CommandResult>& r) {
  CheckResult c;
  if (!r.ok()) {
    // Not connected, disconnected, or no answer in time: nothing about the node.
    c.outcome = Outcome::kInconclusive;
    c.counts = true;
    c.message = r.status().message();
    return c;
  }
  if (r->timed_out) {
    c.outcome = Outcome::kInconclusive;
    c.counts = true;
    c.message = "hpod-deep-check did not finish in time";
    return c;
  }
  json j = json::parse(r->stdout_data, nullptr, false);
  if (!j.is_object()) {
    const std::string last = LastLine(*r);
    // The agent could not start it: the program is not there (base's
    // RunCommand says "not found"). Anything else (the agent busy or stopping,
    // a malformed reply, the program killed) says nothing of the node.
    if (r->exit_code == -1 && last.find("not found") != std::string::npos) {
      c.outcome = Outcome::kUnavailable;
      c.message = last + "; install hpod-deep-check beside hpod-agent";
    } else {
      c.outcome = Outcome::kInconclusive;
      c.counts = true;
      c.message = "hpod-deep-check gave no answer (exit code " + std::to_string(r->exit_code) +
                  (last.empty() ? "" : ": " + last) + ")";
    }
    return c;
  }
  if (j.contains("error")) {
    const auto missing = j.find("missing_tool");
    c.outcome = missing != j.end() && missing->is_boolean() && missing->get<bool>()
                    ? Outcome::kUnavailable
                    : Outcome::kInconclusive;
    c.message = Str(j, "error");
    return c;
  }
  const auto passed = j.find("passed");
  c.outcome = passed != j.end() && passed->is_boolean() && passed->get<bool>() ? Outcome::kPassed
                                                                                : Outcome::kFailed;
  c.message = Str(j, "message");
  if (auto d = j.find("detail"); d != j.end() && d->is_object()) c.detail = *d;
  return c;
}

std::vector<CheckResult> RunStress(const RunFn& run, const std::string& program, int seconds,
                                   const std::vector<store::NodeRecord>& nodes) {
  std::vector<CheckResult> out(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      out[i] = Classify(run(nodes[i].instance_id,
                            {program, "stress", "--seconds", std::to_string(seconds)},
                            std::chrono::seconds(seconds + 120)));
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<CheckResult> RunConnectivity(const RunFn& run, const std::string& program,
                                         int rendezvous_port, int iperf_port,
                                         const std::vector<store::NodeRecord>& ranks) {
  std::string names;
  for (const auto& n : ranks) names += (names.empty() ? "" : ",") + n.hostname;
  std::vector<StatusOr<CommandResult>> answers(ranks.size(), UnavailableError("not run"));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] {
      answers[r] = run(ranks[r].instance_id,
                       {program, "connectivity", "--rank", std::to_string(r), "--world",
                        std::to_string(ranks.size()), "--master", ranks[0].private_ip, "--port",
                        std::to_string(rendezvous_port), "--names", names, "--iperf-port",
                        std::to_string(iperf_port)},
                       std::chrono::seconds(120 + 4 * static_cast<int>(ranks.size())));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<CheckResult> out(ranks.size());
  // Rank 0 judges every rank; without its verdict a rank's own answer says what
  // went wrong there, and the others learn nothing about themselves.
  const CheckResult verdict = Classify(answers[0]);
  json failures;
  if (verdict.outcome == Outcome::kPassed || verdict.outcome == Outcome::kFailed) {
    json j = json::parse(answers[0]->stdout_data, nullptr, false);
    if (auto f = j.find("failures"); f != j.end() && f->is_array() && f->size() == ranks.size()) {
      failures = *f;
    }
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (failures.is_array()) {
      const std::string why = failures[r].is_string() ? failures[r].get<std::string>() : "";
      out[r].outcome = why.empty() ? Outcome::kPassed : Outcome::kFailed;
      out[r].message = why.empty() ? verdict.message : why;
      out[r].detail = verdict.detail;
      continue;
    }
    // No verdict: a rank whose own command failed is the suspect; a rank that
    // answered (its world did not form) is not judged.
    const CheckResult mine = Classify(answers[r]);
    if (mine.outcome == Outcome::kUnavailable || mine.counts) {
      out[r] = mine;
      continue;
    }
    out[r].outcome = Outcome::kInconclusive;
    out[r].counts = false;
    out[r].message = "not judged: the connectivity check did not complete (" + ranks[0].hostname +
                     ", rank 0: " + verdict.message + ")";
  }
  return out;
}

}  // namespace hpod::controlplane::deep
