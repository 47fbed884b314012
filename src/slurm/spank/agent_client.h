#pragma once

// The supervisor's questions to the hpod agent of its node, and the client that asks
// them over the agent's local Unix socket.
//
// Protocol (one exchange per connection): connect, write ONE JSON object on one line,
// read ONE JSON object line back, close. Requests carry "op":
//   job_health  {"op":"job_health","job_id":"12","nodes":["ip-10-77-0-11"],"since":1.7e9}
//     -> {"verdict":"healthy|recovering|recovered|failed","message":"...",
//         "nodes":[{"name":..,"state":..,"recovery_id":..,"action":..,"phase":..,"status":..}]}
//   job_event   {"op":"job_event","job_id":"12","step_id":"0","event":"started|ended|
//                retrying|finished",...}  -> {"ok":true}
// Either may answer {"error":"..."}. README.md in this folder has the full field list.
//
// Thread contract: the value types and codec functions are thread-compatible;
// UnixSocketAgentClient keeps no state between calls and is safe for concurrent use.

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/slurm/spank/options.h"

namespace hpod::spank {

// The agent's judgement of a job's nodes since a point in time.
enum class Verdict {
  kHealthy,     // no recovery of the nodes since `since`, none in progress or about to start
  kRecovering,  // a recovery of one of them is in progress (or about to start)
  kRecovered,   // every recovery since `since` succeeded and nothing is in progress: re-run
  kFailed,      // a recovery failed, or NodeRecovery is None (nodes only marked): give up
};
std::string_view VerdictName(Verdict v);
StatusOr<Verdict> ParseVerdict(std::string_view name);

enum class NodeState { kHealthy, kRecovering, kRecovered, kFailed, kUnknown };
std::string_view NodeStateName(NodeState s);
// Unknown names read as kUnknown: a newer agent may add states.
NodeState ParseNodeState(std::string_view name);

struct NodeHealth {
  std::string name;
  NodeState state = NodeState::kUnknown;
  std::string recovery_id;  // "r-abc"; empty when none
  std::string action;       // "Replace", "Reboot"
  std::string phase;        // "Launched", ...: the recovery's current step
  std::string status;       // "InProgress", "Succeeded", "Failed"
};

struct HealthAnswer {
  Verdict verdict = Verdict::kHealthy;
  std::string message;
  std::vector<NodeHealth> nodes;
};

struct HealthQuery {
  std::string job_id;
  std::vector<std::string> nodes;
  double since = 0;  // seconds since the Unix epoch
};

enum class EventKind { kStarted, kEnded, kRetrying, kFinished };
std::string_view EventKindName(EventKind k);

// One report of the supervisor's progress. Optional fields are omitted from the JSON
// when unset.
struct JobEvent {
  std::string job_id;
  std::string step_id;  // empty until the child srun has told it (started events)
  int restart = 0;      // SLURM_RESTART_COUNT: how often Slurm requeued the job
  int attempt = 0;
  EventKind event = EventKind::kStarted;
  double time = 0;  // seconds since the Unix epoch
  std::vector<std::string> nodes;
  std::optional<int> exit_code;  // ended, finished
  int max_attempts = 0;
  std::string message;
  std::vector<std::string> recovery_ids;   // retrying: this attempt's; finished: all
  std::optional<nlohmann::json> goodput;   // finished: hpod::goodput's summary
  std::optional<std::string> ledger_tail;  // finished, when no summary: the raw ledger tail
};

nlohmann::json HealthQueryToJson(const HealthQuery& q);
nlohmann::json JobEventToJson(const JobEvent& e);
// Reads an answer to job_health. {"error":...} is Unavailable with the agent's text; a
// missing or unknown verdict is Internal (a protocol mismatch).
StatusOr<HealthAnswer> HealthAnswerFromJson(const nlohmann::json& j);

// The supervisor's view of the agent; tests pass a fake.
class AgentClient {
 public:
  virtual ~AgentClient() = default;
  // Where the agent is, for the lines users see ("/run/hpod-agent/agent.sock").
  virtual std::string Address() const = 0;
  // Unavailable / DeadlineExceeded when the agent cannot be reached or does not
  // answer in time; Internal for a malformed answer.
  virtual StatusOr<HealthAnswer> JobHealth(const HealthQuery& query) = 0;
  // OK when the agent answered {"ok":true}. Callers treat failures as best effort.
  virtual Status Report(const JobEvent& event) = 0;
};

class UnixSocketAgentClient final : public AgentClient {
 public:
  struct Options {
    std::string socket_path = kDefaultAgentSocket;
    // Bounds one whole exchange (connect, write, read): a hung agent must not hang
    // srun.
    std::chrono::milliseconds timeout{5000};
    std::size_t max_answer_bytes = 1 << 20;
  };
  explicit UnixSocketAgentClient(Options options) : options_(std::move(options)) {}

  std::string Address() const override { return options_.socket_path; }
  StatusOr<HealthAnswer> JobHealth(const HealthQuery& query) override;
  Status Report(const JobEvent& event) override;

  // One exchange: `request` on one line, one JSON object back. Unavailable: no such
  // socket, refused, closed without an answer; DeadlineExceeded: timeout; Internal:
  // the answer is not one JSON object or is too long.
  StatusOr<nlohmann::json> Exchange(const nlohmann::json& request);

 private:
  const Options options_;
};

}  // namespace hpod::spank
