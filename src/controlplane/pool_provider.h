#pragma once

// `hpodd --provider pool`: nodes are tenures of hosts the admin's machines joined
// into named pools (hpod-agent join), not machines hpodd makes.
//
// Launch reserves a Spare host of the group's pool (`HpodPool` in the group's
// spec, else in the cluster's, else "default") and instance type in one store transaction
// (host_pool.h: ReserveSpare) and tells the host, on its host channel, which
// instance it serves (`assign`, PROTOCOL.md); the host's agent then runs the
// node's agent for it, every path of the node under one tenure directory, and
// that agent connects as the instance with the host's certificate. Terminate
// tells the host to serve nothing: it stops the node's daemons and processes,
// wipes the tenure and says so (`host_status` ""), and the host is Spare again
// (Assigned → Draining → Spare, each with its history row). A host that is not
// connected cannot be wiped now: the instance is terminated at once (its
// certificate stops acting for it when the node's row goes: EndHostTenure), the
// host stays Draining and is wiped when it connects again.
//
// Too few Spare hosts: Launch answers kResourceExhausted ("no Spare host of type
// T in pool P") and CapacityArrives() is true, so the control plane keeps the
// node waiting and tries again rather than failing it; hosts that join fill it.
//
// The shared filesystem (HpodSharedFilesystem of the group, else the cluster)
// travels in `assign`; the host mounts and checks it before the node starts. A
// host that fails the check is Quarantined with the reason and the instance is
// given to another Spare (it waits, Pending, while there is none).
//
// Where it lives: in controlplane, not provider/, because a pool is the store's
// hosts and the agents' host channels, which the provider layer may not see
// (dependencies run one way: controlplane → provider).
//
// Thread contract: thread-safe (the Provider contract); one mutex guards the
// in-memory view of what each host reported, never held across a store
// transaction or a send.

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

inline constexpr char kDefaultPool[] = "default";
// Where the hpod-agent package installs hpod's SPANK plugin on a host.
inline constexpr char kPackagedSpankPlugin[] = "/usr/lib/hpod/spank_hpod.so";

struct PoolProviderOptions {
  // https://ADDRESS:PORT of hpodd's --agent-listen: what hosts dial.
  std::string agent_url;
  // Where hpod's SPANK plugin is on every host; empty: none is loaded.
  std::string spank_plugin = kPackagedSpankPlugin;
  // How long a host may take to come back from a reboot (a new boot id on its
  // channel) before the power hook cycles it or, without one, the node fails
  // (and its recovery replaces it).
  std::chrono::seconds reboot_timeout{300};
  // The admin's power hook (hpodd --power-command), run as
  // `bash -c '<command> "$@"' power HOST_ID ACTION` with ACTION off (fencing a host
  // whose node is replaced while it cannot be reached) or cycle (a reboot past
  // its deadline). Empty: none.
  std::string power_command;
  // A host whose channel dropped without its agent saying it was leaving, and
  // that has not connected again within this, is lost: its node fails (and is
  // replaced), as a local node whose agent died. An agent restarted on purpose
  // says goodbye first; systemd restarts a crashed one after 2 s (RestartSec).
  std::chrono::milliseconds lost_host_after{500};
};

// How the provider reaches hosts (HostChannels, set by the daemon).
struct PoolHostLink {
  std::function<bool(const std::string& host_id)> connected;
  // Sends one frame; false when the host is not connected.
  std::function<bool(const std::string& host_id, const nlohmann::json& frame)> send;
  // HostChannels::LostSince (empty: never lost).
  std::function<std::optional<std::chrono::steady_clock::time_point>(const std::string& host_id)>
      lost_since;
};

class PoolProvider : public provider::Provider {
 public:
  PoolProvider(store::Store& store, const Clock& clock, PoolProviderOptions options);

  // Set once by the daemon, before any node is launched.
  void SetHostLink(PoolHostLink link) { link_ = std::move(link); }

  // A host's host_status (on the server's strand): remembered, answered with an
  // `assign` when it is not what the host should serve, and a wiped host that
  // was draining is Spare again.
  void OnHostStatus(const std::string& host_id, const api::agentproto::HostStatus& status);

  Status Launch(const provider::LaunchSpec& spec) override;
  // Asks the host to reboot (`reboot`): Rebooting until its agent connects with a
  // new boot id, then it serves the instance again from the tenure on disk.
  Status Reboot(const std::string& instance_id, const std::string& request_id) override;
  // On the node's host: kill-node is the power hook's `off` (the machine stops;
  // kUnimplemented without --power-command); kill-agent, kill-slurmd, partition,
  // hang and flag-file are done by the host's agent (`fault`); disk-full and
  // gpu-xid are kUnimplemented (they would harm a machine of yours).
  Status InjectFault(const std::string& instance_id, const provider::FaultSpec& fault) override;
  Status Terminate(const std::string& instance_id) override;
  StatusOr<provider::NodeObservation> Describe(const std::string& instance_id) override;
  StatusOr<std::vector<std::string>> List(const std::string& cluster_id) override;
  bool RunsAgents() const override { return true; }
  bool CapacityArrives() const override { return true; }
  provider::NodeEnvironment Environment() const override;

 private:
  // The instance `host` should serve now: its placement while it serves, ""
  // otherwise or once its instance is being terminated.
  std::string Desired(const store::HostRecord& host) const;
  // Tells the host to serve `instance_id` ("" for none), with the shared
  // filesystem its cluster or group declares (read from the store).
  void SendAssign(const std::string& host_id, const std::string& instance_id);
  // Reserves a Spare for an instance that has none (its host failed the shared
  // filesystem check) and tells it; kResourceExhausted when none is there.
  Status Place(const std::string& instance_id);
  // Describe of a node whose host is Rebooting: Pending until the deadline, then
  // the power hook's cycle (once), then Failed.
  provider::NodeObservation Rebooting(const store::HostRecord& host, provider::NodeObservation o);
  // Runs the power hook once; logged, never fatal.
  void Power(const std::string& host_id, const std::string& action);

  struct RebootState {
    std::string request_id;
    std::string old_boot_id;  // the machine's boot before the request
    std::chrono::steady_clock::time_point deadline;
    bool cycled = false;  // the power hook was asked to cycle it
  };
  store::Store& store_;
  const Clock& clock_;
  const PoolProviderOptions options_;
  PoolHostLink link_;
  mutable Mutex mu_;
  // What each host said last, this hpodd's life.
  std::map<std::string, api::agentproto::HostStatus> reported_ GUARDED_BY(mu_);
  // Reboots in flight, by host (after an hpodd restart, a Rebooting host gets a
  // fresh deadline and is back at its next host_status).
  std::map<std::string, RebootState> reboots_ GUARDED_BY(mu_);
  // Instances asked to terminate this hpodd's life (the reconciler asks again
  // after a restart). Kept after the end: Describe answers kNotFound for them.
  std::set<std::string> terminating_ GUARDED_BY(mu_);
  // Launched instances that lost their host before they ran (it failed the
  // shared filesystem check) and wait for another Spare: instance → why.
  std::map<std::string, std::string> unplaced_ GUARDED_BY(mu_);
};

}  // namespace hpod::controlplane
