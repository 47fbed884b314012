// The agent against an in-process hpodd stand-in on a Unix socket: bootstrap,
// credential persistence, reconnection with the credential, config, heartbeats,
// a command round trip, and refusal handling.

#include "hpod/agent/channel.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "hpod/agent/agent.h"
#include "hpod/agent/test_util.h"
#include "hpod/http/server.h"

namespace hpod::agent {
namespace {

using nlohmann::json;
using testing::ReadTestFile;
using testing::TempDir;

// Plays hpodd's side of the channel. Thread-safe (the server calls it concurrently).
class FakeHpodd {
 public:
  explicit FakeHpodd(std::string socket_path) {
    http::ServerOptions options;
    options.unix_path = std::move(socket_path);
    auto server = http::Server::Start(
        options,
        [](const http::Request&) {
          return http::Response{404, {}, "no"};
        },
        [this](const http::Request& r, std::shared_ptr<http::WebSocket> ws) {
          return Upgrade(r, std::move(ws));
        });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) server_ = std::move(*server);
  }
  ~FakeHpodd() { server_.reset(); }

  // Waits for a message of `type` from the agent (skipping others); the nth one.
  json WaitFor(const std::string& type, int nth = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    json found;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      int seen = 0;
      for (const auto& m : messages_) {
        if (m.value("type", "") == type && ++seen == nth) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  void SendToAgent(const json& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (socket_) socket_->Send(message.dump(), false);
  }
  void DropConnection() {
    std::lock_guard<std::mutex> lock(mu_);
    if (socket_) socket_->Close("test drops the channel");
  }
  std::vector<std::string> authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }
  void RefuseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = true;
  }

  json config = {{"type", "config"},
                 {"heartbeat_interval_ms", 100},
                 {"lifecycle", nullptr},
                 {"resource_config", {{"ClusterConfig", {{"ClusterName", "c"}}}}},
                 {"provisioning", nullptr}};
  int pending_before_config = 1;

 private:
  http::UpgradeResult Upgrade(const http::Request& request, std::shared_ptr<http::WebSocket> ws) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string auth(request.HeaderValue("Authorization"));
    authorizations_.push_back(auth);
    if (refuse_ || request.Path() != "/agent/v1/channel" ||
        request.HeaderValue("X-Hpod-Instance-Id") != "i-1") {
      return http::Response{401, {}, "unknown node"};
    }
    if (auth == "HpodBootstrap tok") {
      if (token_used_) return http::Response{401, {}, "token already used"};
      token_used_ = true;
      ws->Send(json{{"type", "credential"}, {"secret", "s3cret"}}.dump(), false);
    } else if (auth != "HpodNode s3cret") {
      return http::Response{401, {}, "bad credential"};
    }
    socket_ = ws;
    http::WebSocketCallbacks callbacks;
    callbacks.on_message = [this, ws](http::WebSocketMessage m) {
      json message = json::parse(m.data, nullptr, false);
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(message);
      if (message.value("type", "") == "get_config") {
        if (pending_before_config-- > 0) {
          ws->Send(json{{"type", "config_pending"}, {"retry_ms", 50}}.dump(), false);
        } else {
          ws->Send(config.dump(), false);
        }
      }
      cv_.notify_all();
    };
    callbacks.on_close = [] {};
    return callbacks;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> messages_;
  std::vector<std::string> authorizations_;
  std::shared_ptr<http::WebSocket> socket_;
  bool token_used_ = false;
  bool refuse_ = false;
  std::unique_ptr<http::Server> server_;
};

AgentOptions Options(const TempDir& dir) {
  AgentOptions options;
  options.instance_id = "i-1";
  options.endpoint = "unix://" + dir / "agent.sock";
  options.bootstrap_token = "tok";
  options.state_dir = dir / "state";
  options.config_dir = dir / "config";
  options.lifecycle_root = dir / "tmp";
  options.private_ip = "10.77.1.11";
  options.backoff_initial = std::chrono::milliseconds(10);
  options.backoff_max = std::chrono::milliseconds(50);
  return options;
}

TEST(ConnectTimeoutTest, GrowsWithFailuresUpToFourTimesTheBase) {
  using std::chrono::milliseconds;
  EXPECT_EQ(ConnectTimeoutAfter(milliseconds(5000), 0), milliseconds(5000));
  EXPECT_EQ(ConnectTimeoutAfter(milliseconds(5000), 1), milliseconds(10000));
  EXPECT_EQ(ConnectTimeoutAfter(milliseconds(5000), 2), milliseconds(20000));
  EXPECT_EQ(ConnectTimeoutAfter(milliseconds(5000), 30), milliseconds(20000));
}

TEST(MakeDialTest, UnixAndHttpEndpoints) {
  auto unix_dial = MakeDial("unix:///run/hpod/agent.sock", "/agent/v1/channel", "i-1", "HpodNode x",
                            std::chrono::seconds(1));
  ASSERT_TRUE(unix_dial.ok());
  EXPECT_EQ(unix_dial->url, "ws://localhost/agent/v1/channel");
  EXPECT_EQ(unix_dial->options.unix_socket_path, "/run/hpod/agent.sock");
  auto tcp = MakeDial("http://10.0.0.1:8080/", "/agent/v1/sessions/s-1", "i-1", "HpodNode x",
                      std::chrono::seconds(1));
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->url, "http://10.0.0.1:8080/agent/v1/sessions/s-1");
  EXPECT_TRUE(tcp->options.unix_socket_path.empty());
  EXPECT_FALSE(MakeDial("unix://relative", "/x", "i", "a", std::chrono::seconds(1)).ok());
}

TEST(AgentChannelTest, BootstrapConfigHeartbeatCommandAndReconnect) {
  TempDir dir;
  FakeHpodd hpodd(dir / "agent.sock");
  Agent agent(Options(dir), RealClock::Get());
  int exit_code = -1;
  std::thread run([&] { exit_code = agent.Run(); });

  json hello = hpodd.WaitFor("hello");
  ASSERT_FALSE(hello.is_null());
  EXPECT_EQ(hello["private_ip"], "10.77.1.11");
  EXPECT_EQ(hello["protocol_version"], api::agentproto::kProtocolVersion);
  EXPECT_EQ(hello["lifecycle"]["state"], "NotStarted");
  // The credential is on disk, private, before hello.
  EXPECT_EQ(ReadTestFile(dir / "state/node-credential"), "s3cret");
  struct stat st;
  ASSERT_EQ(::stat((dir / "state/node-credential").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // config_pending, then a retried get_config, then the config.
  EXPECT_FALSE(hpodd.WaitFor("get_config", 2).is_null());
  json lifecycle = hpodd.WaitFor("lifecycle");
  EXPECT_EQ(lifecycle["state"], "Succeeded");
  EXPECT_EQ(lifecycle["message"], "no lifecycle configuration");
  EXPECT_TRUE(std::filesystem::exists(dir / "config/resource_config.json"));

  json beat = hpodd.WaitFor("heartbeat", 2);
  ASSERT_FALSE(beat.is_null());
  EXPECT_EQ(beat["lifecycle"]["state"], "Succeeded");
  EXPECT_GT(beat["seq"].get<int>(), 1);

  // Malformed frames from hpodd cost nothing but a log line (a malformed command is
  // answered, so its caller is not left waiting); the next good one runs.
  hpodd.SendToAgent({{"no", "type"}});
  hpodd.SendToAgent({{"type", "error"}, {"frame_type", "heartbeat"}, {"message", "test"}});
  hpodd.SendToAgent({{"type", "command"}, {"id", "c-0"}, {"argv", "echo"}});
  json refused = hpodd.WaitFor("command_result");
  EXPECT_EQ(refused["id"], "c-0");
  EXPECT_EQ(refused["error"],
            "malformed command: command: field 'argv' must be an array of strings");
  hpodd.SendToAgent(
      {{"type", "command"}, {"id", "c-1"}, {"argv", {"echo", "pong"}}, {"timeout_ms", 5000}});
  json result = hpodd.WaitFor("command_result", 2);
  EXPECT_EQ(result["id"], "c-1");
  EXPECT_EQ(result["stdout"], "pong\n");
  EXPECT_EQ(result["exit_code"], 0);

  // After a drop the agent comes back with its node credential, not the token.
  hpodd.DropConnection();
  json second_hello = hpodd.WaitFor("hello", 2);
  ASSERT_FALSE(second_hello.is_null());
  EXPECT_EQ(second_hello["lifecycle"]["state"], "Succeeded");
  auto auths = hpodd.authorizations();
  ASSERT_GE(auths.size(), 2u);
  EXPECT_EQ(auths.front(), "HpodBootstrap tok");
  EXPECT_EQ(auths.back(), "HpodNode s3cret");

  agent.Stop();
  run.join();
  EXPECT_EQ(exit_code, 0);
}

TEST(AgentChannelTest, RefusedCredentialExitsWithConfigError) {
  TempDir dir;
  FakeHpodd hpodd(dir / "agent.sock");
  testing::WriteTestFile(dir / "state/node-credential", "stale", 0600);
  hpodd.RefuseAll();
  Agent agent(Options(dir), RealClock::Get());
  EXPECT_EQ(agent.Run(), kExitConfig);
}

TEST(AgentChannelTest, NoTokenAndNoCredentialIsAConfigError) {
  TempDir dir;
  AgentOptions options = Options(dir);
  options.bootstrap_token.clear();
  Agent agent(options, RealClock::Get());
  EXPECT_EQ(agent.Run(), kExitConfig);
}

TEST(AgentChannelTest, RetriesWhileHpoddIsDown) {
  TempDir dir;
  Agent agent(Options(dir), RealClock::Get());
  std::thread run([&] { EXPECT_EQ(agent.Run(), 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // several failed dials
  FakeHpodd hpodd(dir / "agent.sock");
  EXPECT_FALSE(hpodd.WaitFor("hello").is_null());
  agent.Stop();
  run.join();
}

}  // namespace
}  // namespace hpod::agent
