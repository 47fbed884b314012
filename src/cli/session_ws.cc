// The production SessionConnector over http::WebSocketClient. Kept apart from
// session.cc so that only binaries that start real sessions (hpod, through
// cli::Main) link the WebSocket implementation.

#include "hpod/cli/session.h"
#include "hpod/http/websocket.h"

namespace hpod::cli {
namespace {

// Thread contract: as SessionSocket (WebSocketClient allows Send and Close
// concurrently with one Receive).
class WebSocketSessionSocket final : public SessionSocket {
 public:
  explicit WebSocketSessionSocket(std::unique_ptr<http::WebSocketClient> ws) : ws_(std::move(ws)) {}

  Status Send(std::string_view frame) override { return ws_->Send(frame, /*binary=*/true); }

  StatusOr<std::string> Receive(std::chrono::milliseconds timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceededError("no session frame");
      HPOD_ASSIGN_OR_RETURN(http::WebSocketMessage message, ws_->Receive(left));
      // Text messages are not session frames.
      if (message.binary) return std::move(message.data);
    }
  }

  void Close() override { ws_->Close(); }

 private:
  std::unique_ptr<http::WebSocketClient> ws_;
};

}  // namespace

SessionConnector RealSessionConnector(const http::ClientOptions& api) {
  return [connect_timeout = api.connect_timeout, ca_file = api.ca_file](
             const std::string& url,
             const std::vector<http::Header>& headers) -> StatusOr<std::unique_ptr<SessionSocket>> {
    http::WebSocketClientOptions options;
    options.connect_timeout = connect_timeout;
    options.ca_file = ca_file;
    HPOD_ASSIGN_OR_RETURN(std::unique_ptr<http::WebSocketClient> ws,
                          http::WebSocketClient::Connect(url, headers, options));
    return std::unique_ptr<SessionSocket>(std::make_unique<WebSocketSessionSocket>(std::move(ws)));
  };
}

}  // namespace hpod::cli
