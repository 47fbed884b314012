#pragma once

// Shell sessions on the node (PROTOCOL.md, "Session frames"): on `open_session` the
// agent dials GET /agent/v1/sessions/<id>, starts the argv (empty: `/bin/bash -l`),
// on a PTY when asked, and relays binary frames until the child exits (then sends
// `2 exit` and closes) or the socket closes (then ends the child).
//
// Thread contract: RunSession blocks its calling thread (one thread per session);
// it is safe to run many at once.

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/agent/channel.h"

namespace hpod::agent {

struct SessionRequest {
  std::string session_id;
  std::vector<std::string> argv;  // empty: /bin/bash -l
  unsigned short rows = 24;
  unsigned short cols = 80;
  bool pty = true;
  // The node's user the session runs as (a login environment, its home as the
  // working directory); empty: root.
  std::string user;
  // Refuse a system account as `user` (uid below kFirstRegularUid).
  bool unprivileged = false;
  // Set by the agent, not the message: non-empty on a machine serving a NodeName
  // not its own, which the shell then has for its hostname, as the node's jobs
  // do (SlurmNode::JobHostname): an srun typed there names the node.
  std::string uts_hostname;
};

// Parses an `open_session` message (api::agentproto::OpenSession; missing fields
// keep their defaults). kInvalidArgument naming the field for a malformed one.
StatusOr<SessionRequest> ParseSessionRequest(const nlohmann::json& message);

// The first uid of regular users (Debian's UID_MIN): below it are root and the
// system accounts (munge, mysql...), which a key of the user role may not be.
inline constexpr unsigned kFirstRegularUid = 1000;

// What the session's child runs: the request's argv, or the login shell (after
// the node's motd) when it has none; as `user` through runuser(1) when set
// (`runuser -u USER -- argv…`, or `runuser -l USER` for the login shell).
std::vector<std::string> SessionArgv(const SessionRequest& request);

// Frame kinds (the first byte of each binary message).
enum class FrameKind : unsigned char { kData = 0, kResize = 1, kExit = 2, kError = 3, kEof = 4 };

// Slurm's user commands (sinfo, squeue, sbatch, srun, salloc, scontrol, scancel).
extern const char* const kSlurmCommands[7];

// The one line each of kSlurmCommands prints (to stderr, exit status 1) in a
// session on a node of a cluster without Slurm, e.g. "sinfo: this hpod cluster has
// no Slurm (no instance group has a Slurm role); see /opt/hpod/motd".
std::string NoSlurmHint(std::string_view command);

// What a session adds to its shell's environment: when `no_slurm_marker` exists
// (slurm_node.h, kNoSlurmMarker), a bash function per Slurm command, exported
// (BASH_FUNC_<name>%%) so that it answers with NoSlurmHint; otherwise nothing.
std::map<std::string, std::string> SessionEnvironment(const std::string& no_slurm_marker);

std::string EncodeFrame(FrameKind kind, std::string_view payload);
std::string EncodeExitFrame(int32_t status);

// Runs one session to its end. Returns when the child has exited and its status was
// sent, when the socket closed (the child is killed), or soon after `stop` is set.
void RunSession(const Dial& dial, const SessionRequest& request, const std::atomic<bool>& stop);

}  // namespace hpod::agent
