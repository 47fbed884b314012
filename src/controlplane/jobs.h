#pragma once

// hpodd's side of auto-resume: the answers to the questions the supervisor inside
// srun (src/slurm/spank/) asks through its node's agent (agent PROTOCOL.md, "Local
// socket"), and the record of each supervised job.
//
//  - job_health: have the job's nodes failed, are they being recovered, are they
//    back? Judged from the recovery records (recovery.h), never from srun's exit
//    code: a node counts as failed for the job when a recovery of its hostname is in
//    progress, or began at or after the step's start.
//  - job_event: the supervisor's attempts (started / ended / retrying / finished)
//    and the job's goodput summary (base/goodput.h), kept per job for
//    `hpod describe-job-goodput` and for the recovery reconciler, which does not wait
//    for a supervised job to leave a node it must replace (the job waits for it).
//
// A job record lives in the settings table under cluster/<id>/job/<job id>, so it
// goes with its cluster. Events are capped (kMaxJobEvents, oldest dropped).
//
// Thread contract: thread-safe (every call is one store transaction).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

inline constexpr size_t kMaxJobEvents = 500;
// A goodput summary larger than this is not kept (a real one is a few KiB per
// attempt).
inline constexpr size_t kMaxGoodputBytes = 256 * 1024;

// The settings key of a job's record.
std::string JobKey(const std::string& cluster_id, const std::string& job_id);

// A supervised job's record: {"job_id", "nodes", "events": [...], "goodput": {...},
// "finished": bool, "updated": epoch}. kNotFound when hpodd never heard of the job.
StatusOr<nlohmann::json> ReadJob(store::ReadTx& tx, const std::string& cluster_id,
                                 const std::string& job_id);

// Whether `job_id` is an auto-resume job whose supervisor is still running (its
// step may end on a failed node; it then waits for the node to come back).
bool JobIsSupervised(store::ReadTx& tx, const std::string& cluster_id, const std::string& job_id);

// What job_health says of the nodes, from the cluster's recoveries and nodes.
// `automatic`: the cluster's NodeRecovery is Automatic, so a node that is not
// Running and has no recovery yet is about to get one (recovering, not failed).
nlohmann::json JudgeJobNodes(const std::vector<store::RecoveryRecord>& recoveries,
                             const std::vector<store::NodeRecord>& nodes,
                             const std::vector<std::string>& names, double since, bool automatic);

// HpodDescribeJobGoodput: the job's supervisor events, its goodput ledger summary
// and each recovery of one of its nodes detected while it ran, with the seconds of
// detection, replacement, restart, rendezvous and checkpoint load.
// kNotFound (ResourceNotFound) for a job hpodd never heard of.
StatusOr<nlohmann::ordered_json> DescribeJobGoodput(store::ReadTx& tx,
                                                    const store::ClusterRecord& cluster,
                                                    const std::string& job_id);

class JobService {
 public:
  JobService(store::Store& store, const Clock& clock);

  // The answer object to one local-socket request from a node of `cluster_id`:
  // {"error": ...} for a request it cannot read, naming the field.
  // `node_clock_offset` is the asking node's clock minus hpodd's
  // (AgentService::ClockOffset); job_health's `since`, read on the node, is moved
  // onto hpodd's clock with it, and job_event keeps it with the event for
  // DescribeJobGoodput's join of the node's times with recoveries'. None (an
  // agent older than heartbeat.time): the node's times are taken as they come, as
  // if the clocks agreed.
  nlohmann::json Answer(const std::string& cluster_id, const nlohmann::json& request,
                        std::optional<double> node_clock_offset = std::nullopt);

 private:
  nlohmann::json Health(const std::string& cluster_id, const nlohmann::json& request,
                        std::optional<double> node_clock_offset);
  nlohmann::json Event(const std::string& cluster_id, const nlohmann::json& request,
                       std::optional<double> node_clock_offset);

  store::Store& store_;
  const Clock& clock_;
};

}  // namespace hpod::controlplane
