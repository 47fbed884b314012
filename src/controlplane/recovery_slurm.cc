// RecoveryReconciler: the Slurm commands a recovery sends through the
// controller's agent (squeue, scancel, requeue, the controller's own shutdown
// and state save), and how their answers are read.

#include <sstream>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/jobs.h"
#include "hpod/controlplane/recovery_reconciler.h"

namespace hpod::controlplane {

StatusOr<std::vector<std::pair<std::string, std::string>>> RecoveryReconciler::JobsOn(
    const SlurmReconciler::Pass& slurm, const std::string& hostname) {
  std::string text;
  HPOD_RETURN_IF_ERROR(Scontrol(slurm, {"squeue", "-h", "-w", hostname, "-o", "%A %B"}, &text));
  std::vector<std::pair<std::string, std::string>> jobs;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, batch_host;
    if (fields >> id) {
      fields >> batch_host;
      jobs.emplace_back(id, batch_host);
    }
  }
  return jobs;
}

StatusOr<bool> RecoveryReconciler::CancelSupervisedSteps(const store::ClusterRecord& cluster,
                                                         const std::string& hostname,
                                                         const SlurmReconciler::Pass& slurm,
                                                         std::string* cancelled) {
  HPOD_ASSIGN_OR_RETURN(auto jobs, JobsOn(slurm, hostname));
  if (jobs.empty()) return false;  // the table has not caught up: wait as for any job
  bool all = true;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    for (const auto& job : jobs) all = all && JobIsSupervised(tx, cluster.id, job.first);
    return OkStatus();
  }));
  if (!all) return false;
  HPOD_RETURN_IF_ERROR(CancelSteps(cluster, slurm, hostname, cancelled));
  return true;
}

Status RecoveryReconciler::CancelSteps(const store::ClusterRecord& cluster,
                                       const SlurmReconciler::Pass& slurm,
                                       const std::string& hostname, std::string* ids) {
  // Never the batch script (a cancelled batch step ends the job as cancelled, never
  // requeued), nor the extern step.
  HPOD_RETURN_IF_ERROR(
      Scontrol(slurm,
               {"bash", "-c",
                "ids=$(squeue -h -s -w \"$1\" -o %i | grep -v -e batch -e extern); "
                "for i in $ids; do scancel \"$i\"; done; echo $ids",
                "cancel", hostname},
               ids));
  while (!ids->empty() && (ids->back() == '\n' || ids->back() == ' ')) ids->pop_back();
  // An auto-resume job whose batch script ran on the node loses the script (and its
  // supervisor) with the node: it is requeued now, so it starts again from the top
  // within seconds and resumes from its checkpoint, not minutes later when
  // slurmctld notices the missing script ("not found BatchStartTime after
  // startup"). Any other job is left to Slurm, as on HyperPod. A job that may not
  // be requeued (--no-requeue) refuses, and Slurm then ends it.
  HPOD_ASSIGN_OR_RETURN(auto jobs, JobsOn(slurm, hostname));
  for (const auto& entry : jobs) {
    // Not a structured binding: clang (the thread-safety check) refuses to capture
    // one in the lambda below.
    const std::string& job = entry.first;
    if (entry.second != hostname) continue;
    bool supervised = false;
    HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
      supervised = JobIsSupervised(tx, cluster.id, job);
      return OkStatus();
    }));
    if (!supervised) continue;
    Status requeued = Scontrol(slurm, {"scontrol", "requeue", job});
    *ids += (ids->empty() ? "" : " ") +
            (requeued.ok() ? "requeued job " + job
                           : "job " + job + " not requeued (" + requeued.message() + ")");
  }
  return OkStatus();
}

Status RecoveryReconciler::Scontrol(const SlurmReconciler::Pass& slurm,
                                    const std::vector<std::string>& argv, std::string* out) {
  if (agents_ == nullptr || !slurm.plan) return FailedPreconditionError("no Slurm controller");
  std::vector<std::string> cmd = {"env",
                                  std::string("SLURM_CONF=") + slurm::kConfDir + "/slurm.conf"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  HPOD_ASSIGN_OR_RETURN(CommandResult res, agents_->Run(slurm.plan->controller_instance, cmd,
                                                        std::chrono::seconds(5)));
  if (res.exit_code != 0) {
    return UnavailableError(argv[0] + " on the controller failed (exit " +
                            std::to_string(res.exit_code) + "): " + res.stderr_data);
  }
  if (out != nullptr) *out = res.stdout_data;
  return OkStatus();
}

}  // namespace hpod::controlplane
