#pragma once

// `hpod start-session --target sagemaker-cluster:<cluster-id>_<group>-<instance-id>
// [--command CMD]`: a shell (or one command) on a cluster node, as
// `aws ssm start-session` opens one on a HyperPod node.
//
//   1. HpodStartSession {Target, Command?, Rows?, Cols?} -> {SessionId, StreamUrl,
//      TokenValue} through the usual signed API call;
//   2. a WebSocket to StreamUrl with "Authorization: HpodSession <TokenValue>" (a
//      browser, which cannot set that header, offers the subprotocols
//      "hpod-session, hpod-token.<TokenValue>" instead: src/agent/PROTOCOL.md);
//   3. the relay: binary frames whose first byte is the kind (src/agent/PROTOCOL.md,
//      "Session frames"): 0 data, 1 resize, 2 exit, 3 error, 4 eof.
//
// Interactive mode (no Command) puts a terminal stdin into raw mode for the whole
// relay (restored on every exit path, signals included), sends the window size at
// the start and on every SIGWINCH, and ends with "Exiting session with sessionId:
// <id>." on stderr. Command mode relays stdin when it is not a terminal and sends an
// eof frame when it ends (at once when stdin is a terminal, so that a command that
// reads stdin does not wait for input nobody relays). Either way the exit status of
// the remote process becomes ours; an error frame or a lost connection is 255.
//
// The socket is behind SessionSocket and the relay takes plain file descriptors so
// that tests drive it with a fake socket and pipes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/cli/client.h"
#include "hpod/http/client.h"
#include "hpod/http/message.h"

namespace hpod::cli {

enum class FrameKind : uint8_t { kData = 0, kResize = 1, kExit = 2, kError = 3, kEof = 4 };

std::string EncodeDataFrame(std::string_view data);
// Rows then cols, big-endian uint16 each.
std::string EncodeResizeFrame(uint16_t rows, uint16_t cols);
std::string EncodeEofFrame();
// Big-endian int32 status (what the node sends; here for tests and symmetry).
std::string EncodeExitFrame(int32_t status);
std::string EncodeErrorFrame(std::string_view text);

// One session's stream as the relay sees it.
//
// Thread contract: Send and Close may be called from any thread, concurrently with
// Receive; Receive is called from one thread at a time.
class SessionSocket {
 public:
  virtual ~SessionSocket() = default;
  // Sends one binary message; kUnavailable when the connection is gone.
  virtual Status Send(std::string_view frame) = 0;
  // The next binary message: kDeadlineExceeded when none came within `timeout`,
  // kUnavailable when the connection closed (message says why). Text messages are
  // not part of the protocol and are skipped by the implementation or the relay.
  virtual StatusOr<std::string> Receive(std::chrono::milliseconds timeout) = 0;
  // Closes the connection; a blocked Receive returns kUnavailable. Idempotent.
  virtual void Close() = 0;
};

// Opens the stream: (url, extra request headers) -> socket. Refused upgrades fail
// with kUnauthenticated / kPermissionDenied / kNotFound / kInvalidArgument (message
// = the response body), unreachable endpoints with kUnavailable, as
// http::WebSocketClient::Connect does.
using SessionConnector = std::function<StatusOr<std::unique_ptr<SessionSocket>>(
    const std::string& url, const std::vector<http::Header>& headers)>;

// The production connector over http::WebSocketClient (session_ws.cc; kept out of
// session.cc so that tests link without the WebSocket implementation).
// `options`: the API calls' connect timeout and CA bundle (ca_file), which a
// wss:// StreamUrl is verified against as the API endpoint is.
SessionConnector RealSessionConnector(const http::ClientOptions& options);

// Terminal window size (rows, cols); nullopt when unknown.
using WindowSizeFn = std::function<std::optional<std::pair<uint16_t, uint16_t>>()>;

struct RelayOptions {
  // Read until EOF and sent as data frames; -1 (or relay_stdin false) sends an
  // eof frame at once.
  int stdin_fd = -1;
  bool relay_stdin = true;
  // Receives the data frames' payloads.
  int stdout_fd = -1;
  // Interactive: send the window size at the start and whenever `resize_fd`
  // becomes readable (the SIGWINCH self-pipe; the relay drains it).
  bool send_window_size = false;
  WindowSizeFn window_size;
  int resize_fd = -1;
  // How long one wait for stdin or the socket lasts before the loops look at
  // their stop flags again; bounds every blocking call.
  std::chrono::milliseconds poll_interval{500};
};

struct RelayResult {
  enum class End { kExited, kError, kLost };
  End end = End::kLost;
  int32_t exit_status = 0;  // kExited
  std::string message;      // kError: the node's text; kLost: what happened
};

// Relays until the node reports an exit or an error, or the connection goes away.
// Runs the socket -> stdout direction on a second thread; both threads are joined
// before it returns.
//
// Thread contract: blocks the calling thread; uses `socket` and the fds
// exclusively while it runs.
RelayResult RunRelay(SessionSocket& socket, const RelayOptions& options);

struct StartSessionOptions {
  std::string target;
  std::optional<std::string> command;
  std::optional<std::string> user;  // the node's user to run as (default root)
  // Where the API endpoint is, for resolving a StreamUrl that is only a path.
  std::string endpoint_url;
};

// The terminal side of one session.
struct SessionIo {
  int stdin_fd = 0;
  int stdout_fd = 1;
  bool stdin_is_tty = false;  // raw mode, window size, SIGWINCH (interactive only)
  std::ostream* err = nullptr;
  SessionConnector connect;
  std::chrono::milliseconds poll_interval{500};
};

// The whole command: start, connect, relay. Returns the process exit code (the
// remote status clamped to 0..255, or 255), having printed what happened to
// io.err; fails only when the session could not be started or connected (the
// message is the one line to print: service errors as the CLI prints them, refused
// upgrades as "Could not open the session stream ...").
//
// Thread contract: blocks the calling thread; in interactive mode it installs
// process-wide signal handlers for the duration, so run one at a time.
StatusOr<int> RunStartSession(ApiClient& client, const StartSessionOptions& options,
                              const SessionIo& io);

}  // namespace hpod::cli
