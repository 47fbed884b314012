#pragma once

// Shell sessions on the node (PROTOCOL.md, "Session frames"): on `open_session` the
// agent dials GET /agent/v1/sessions/<id>, starts the argv (empty: `/bin/bash -l`),
// on a PTY when asked, and relays binary frames until the child exits (then sends
// `2 exit` and closes) or the socket closes (then ends the child).
//
// Thread contract: RunSession blocks its calling thread (one thread per session);
// it is safe to run many at once.

#include <atomic>
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
};

// Parses an `open_session` message (api::agentproto::OpenSession; missing fields
// keep their defaults). kInvalidArgument naming the field for a malformed one.
StatusOr<SessionRequest> ParseSessionRequest(const nlohmann::json& message);

// Frame kinds (the first byte of each binary message).
enum class FrameKind : unsigned char { kData = 0, kResize = 1, kExit = 2, kError = 3, kEof = 4 };

std::string EncodeFrame(FrameKind kind, std::string_view payload);
std::string EncodeExitFrame(int32_t status);

// Runs one session to its end. Returns when the child has exited and its status was
// sent, when the socket closed (the child is killed), or soon after `stop` is set.
void RunSession(const Dial& dial, const SessionRequest& request, const std::atomic<bool>& stop);

}  // namespace hpod::agent
