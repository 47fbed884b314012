// AgentService against real WebSocket clients playing the agent and the user, over
// the real http::Server (Unix socket for agents, TCP loopback for users).

#include "hpod/controlplane/agent_service.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "hpod/controlplane/agent_service_test_fixture.h"

namespace hpod::controlplane {
namespace {

using agent_test::AgentServiceTest;
using agent_test::kWait;
using nlohmann::json;
using std::chrono::seconds;

TEST_F(AgentServiceTest, BootstrapTokenIsOneTimeAndCredentialWorks) {
  EXPECT_EQ(Dial("/agent/v1/channel", kNode1, "HpodBootstrap wrong").status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(Dial("/agent/v1/channel", "i-0000000000000000f", "HpodBootstrap x").status().code(),
            StatusCode::kNotFound);
  std::string secret;
  auto ws = Register(&secret);
  ws->Close();
  // Confirmed by hello: the bootstrap token is dead, the credential is not.
  auto again =
      Dial("/agent/v1/channel", kNode1, "HpodBootstrap " + agents_->BootstrapToken(kNode1));
  EXPECT_EQ(again.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(again.status().message().find("already used"), std::string::npos);
  EXPECT_EQ(Dial("/agent/v1/channel", kNode1, "HpodNode " + secret + "x").status().code(),
            StatusCode::kUnauthenticated);
  auto ok = Dial("/agent/v1/channel", kNode1, "HpodNode " + secret);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  // Another node's id with this node's secret is refused.
  EXPECT_EQ(Dial("/agent/v1/channel", "i-00000000000000002", "HpodNode " + secret).status().code(),
            StatusCode::kUnauthenticated);
}

TEST_F(AgentServiceTest, LifecycleLogsAndCommands) {
  std::string secret;
  auto ws = Register(&secret);
  ASSERT_TRUE(
      ws->Send(json{{"type", "log"}, {"stream", "LifecycleConfig"}, {"data", "hi\n"}}.dump(), false)
          .ok());
  ASSERT_TRUE(ws->Send(json{{"type", "lifecycle"},
                            {"state", "Failed"},
                            {"exit_code", 3},
                            {"message", "Lifecycle script on_create.sh exited with code 3"}}
                           .dump(),
                       false)
                  .ok());
  // A command round trip also proves the frames above were handled (in order).
  auto result = std::async(std::launch::async, [&] {
    return agents_->RunCommand(kNode1, {"echo", "x"}, std::chrono::milliseconds(5000));
  });
  json cmd = Next(*ws);
  ASSERT_EQ(cmd["type"], "command");
  EXPECT_EQ(cmd["argv"], json({"echo", "x"}));
  ASSERT_TRUE(
      ws->Send(
            json{{"type", "command_result"}, {"id", cmd["id"]}, {"exit_code", 0}, {"stdout", "x\n"}}
                .dump(),
            false)
          .ok());
  auto r = result.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "x\n");

  store::AgentRecord a = AgentOf(kNode1);
  EXPECT_EQ(a.lifecycle_state, "Failed");
  EXPECT_EQ(a.lifecycle_message, "Lifecycle script on_create.sh exited with code 3");
  EXPECT_GT(a.registered_time, 0);
  {
    std::lock_guard<std::mutex> l(mu_);
    EXPECT_EQ(changed_, std::vector<std::string>{"abcdefabcdef"});
  }
  auto log = logs_->Read("abcdefabcdef", kNode1, "LifecycleConfig", "", 100);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->data, "hi\n");
  // No agent, no command.
  EXPECT_EQ(
      agents_->RunCommand("i-00000000000000002", {"true"}, std::chrono::seconds(1)).status().code(),
      StatusCode::kFailedPrecondition);
}

TEST_F(AgentServiceTest, SessionsRelayBothWaysWithAOneTimeToken) {
  EXPECT_EQ(agents_->StartSession(kNode1, "", "", false, 24, 80).status().code(),
            StatusCode::kFailedPrecondition);
  std::string secret;
  auto ws = Register(&secret);
  auto grant = agents_->StartSession(kNode1, "hostname", "alice", true, 30, 100);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  json open = Next(*ws);
  ASSERT_EQ(open["type"], "open_session");
  EXPECT_EQ(open["session_id"], grant->session_id);
  EXPECT_EQ(open["argv"], json({"bash", "-lc", "hostname"}));
  EXPECT_EQ(open["pty"], false);
  EXPECT_EQ(open["user"], "alice");
  EXPECT_EQ(open["unprivileged"], true);

  // The node speaks first; hpodd keeps it until the user connects.
  auto node = Dial("/agent/v1/sessions/" + grant->session_id, kNode1, "HpodNode " + secret);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_TRUE((*node)->Send(std::string("\0ip-10-77-0-10\n", 15), true).ok());

  const std::string url = "ws://127.0.0.1:" + std::to_string(user_server_->port()) +
                          "/v1/sessions/" + grant->session_id;
  EXPECT_EQ(
      http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession nope"}}).status().code(),
      StatusCode::kUnauthenticated);
  auto user =
      http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession " + grant->token}});
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  auto first = (*user)->Receive(kWait);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data, std::string("\0ip-10-77-0-10\n", 15));
  ASSERT_TRUE((*user)->Send(std::string("\0ls\n", 4), true).ok());
  auto typed = (*node)->Receive(kWait);
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(typed->data, std::string("\0ls\n", 4));
  // The token was for one connection.
  EXPECT_EQ(http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession " + grant->token}})
                .status()
                .code(),
            StatusCode::kUnauthenticated);
  // The node's exit frame reaches the user, then the close.
  ASSERT_TRUE((*node)->Send(std::string("\x02\0\0\0\x07", 5), true).ok());
  (*node)->Close();
  auto exit = (*user)->Receive(kWait);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->data, std::string("\x02\0\0\0\x07", 5));
  EXPECT_EQ((*user)->Receive(kWait).status().code(), StatusCode::kUnavailable);
}

// A session that cannot start (the node has no such user) ends on the node before
// the user connects: the user still gets the node's error frame, then the close.
TEST_F(AgentServiceTest, ASessionThatEndsBeforeTheUserConnectsStillSaysWhy) {
  std::string secret;
  auto ws = Register(&secret);
  auto grant = agents_->StartSession(kNode1, "id", "nobody", true, 24, 80);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(Next(*ws)["type"], "open_session");
  auto node = Dial("/agent/v1/sessions/" + grant->session_id, kNode1, "HpodNode " + secret);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  const std::string error = std::string("\x03") + "cannot start runuser: no user 'nobody'";
  ASSERT_TRUE((*node)->Send(error, true).ok());
  (*node)->Close();
  const std::string url = "ws://127.0.0.1:" + std::to_string(user_server_->port()) +
                          "/v1/sessions/" + grant->session_id;
  // The user comes late, as a CLI does after HpodStartSession returns. (Had hpodd
  // not yet seen the node's close, the frame and the close would still arrive in
  // this order: the check passes either way once the session is kept.)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto user =
      http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession " + grant->token}});
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  auto first = (*user)->Receive(kWait);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->data, error);
  EXPECT_EQ((*user)->Receive(kWait).status().code(), StatusCode::kUnavailable);
}

// The same while the user connects: the node's error and close race the user's
// upgrade, and the error still comes first, whichever wins. (Frames handed over at
// the upgrade were once queued after a close the node's side had just sent; that
// window is a few instructions wide, so this stress rarely hits it on an idle
// machine: CI's e2e did, under load.)
TEST_F(AgentServiceTest, ANodesErrorRacingTheUsersConnectStillArrives) {
  std::string secret;
  auto ws = Register(&secret);
  for (int i = 0; i < 20; ++i) {
    auto grant = agents_->StartSession(kNode1, "id", "munge", true, 24, 80);
    ASSERT_TRUE(grant.ok()) << grant.status().ToString();
    ASSERT_EQ(Next(*ws)["type"], "open_session");
    auto node = Dial("/agent/v1/sessions/" + grant->session_id, kNode1, "HpodNode " + secret);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    const std::string error = std::string("\x03") + "'munge' is a system account";
    std::thread racer([&] {
      ASSERT_TRUE((*node)->Send(error, true).ok());
      (*node)->Close();
    });
    const std::string url = "ws://127.0.0.1:" + std::to_string(user_server_->port()) +
                            "/v1/sessions/" + grant->session_id;
    auto user =
        http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession " + grant->token}});
    racer.join();
    ASSERT_TRUE(user.ok()) << user.status().ToString();
    auto first = (*user)->Receive(kWait);
    ASSERT_TRUE(first.ok()) << "round " << i << ": " << first.status().ToString();
    EXPECT_EQ(first->data, error) << "round " << i;
  }
}

// A browser's form of the session token: subprotocols, since it cannot set
// Authorization on a WebSocket (PROTOCOL.md "Session frames").
TEST_F(AgentServiceTest, ABrowserSendsTheSessionTokenAsASubprotocol) {
  std::string secret;
  auto ws = Register(&secret);
  auto grant = agents_->StartSession(kNode1, "", "", false, 24, 80);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(Next(*ws)["type"], "open_session");
  auto node = Dial("/agent/v1/sessions/" + grant->session_id, kNode1, "HpodNode " + secret);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  const std::string url = "ws://127.0.0.1:" + std::to_string(user_server_->port()) +
                          "/v1/sessions/" + grant->session_id;
  auto offer = [](const std::string& token) {
    return std::vector<http::Header>{
        {"Sec-WebSocket-Protocol", "hpod-session, hpod-token." + token}};
  };
  // A wrong token, and the right one without hpod-session, are refused.
  EXPECT_EQ(http::WebSocketClient::Connect(url, offer("nope")).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(http::WebSocketClient::Connect(
                url, {{"Sec-WebSocket-Protocol", "hpod-token." + grant->token}})
                .status()
                .code(),
            StatusCode::kUnauthenticated);
  auto user = http::WebSocketClient::Connect(url, offer(grant->token));
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  // The client (like a browser) requires the selection; hpodd selects hpod-session.
  EXPECT_EQ((*user)->subprotocol(), "hpod-session");
  ASSERT_TRUE((*user)->Send(std::string("\0hostname\n", 10), true).ok());
  auto typed = (*node)->Receive(kWait);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(typed->data, std::string("\0hostname\n", 10));
  ASSERT_TRUE((*node)->Send(std::string("\0ip-10-77-0-10\n", 15), true).ok());
  auto shown = (*user)->Receive(kWait);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->data, std::string("\0ip-10-77-0-10\n", 15));
  // Still one connection per token, whichever form carries it.
  EXPECT_EQ(http::WebSocketClient::Connect(url, offer(grant->token)).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(http::WebSocketClient::Connect(url, {{"Authorization", "HpodSession " + grant->token}})
                .status()
                .code(),
            StatusCode::kUnauthenticated);
  (*user)->Close();
  (*node)->Close();
}

TEST_F(AgentServiceTest, MalformedFramesAreRefusedAndTheChannelKeepsWorking) {
  std::string secret;
  auto ws = Register(&secret);
  // A wrongly typed field: an error frame naming it, and the connection stays.
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", "seven"}}.dump(), false).ok());
  json error = Next(*ws);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["frame_type"], "heartbeat");
  EXPECT_EQ(error["message"], "heartbeat: field 'seq' must be an integer");
  // Not JSON at all, and no type: refused the same way.
  ASSERT_TRUE(ws->Send("{not json", false).ok());
  EXPECT_EQ(Next(*ws)["message"], "frame: not a JSON object");
  ASSERT_TRUE(ws->Send(json{{"seq", 1}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["message"], "frame: field 'type' is missing");
  // A second bad heartbeat is answered too, but recorded as an event only once.
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", 1}, {"slurm", 3}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["message"], "heartbeat: field 'slurm' must be an object");
  // A malformed lifecycle report changes nothing.
  ASSERT_TRUE(
      ws->Send(json{{"type", "lifecycle"}, {"state", "Failed"}, {"message", 3}}.dump(), false)
          .ok());
  EXPECT_EQ(Next(*ws)["message"], "lifecycle: field 'message' must be a string");

  // The good frames after them are processed.
  ASSERT_TRUE(ws->Send(json{{"type", "lifecycle"}, {"state", "Running"}}.dump(), false).ok());
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["type"], "config_pending");
  store::AgentRecord a = AgentOf(kNode1);
  EXPECT_EQ(a.lifecycle_state, "Running");
  EXPECT_TRUE(agents_->Liveness(kNode1).connected);
  EXPECT_EQ(
      NodeEvents(),
      (std::vector<std::string>{
          "hpodd refused a frame from the hpod agent: heartbeat: field 'seq' must be an integer",
          "hpodd refused a frame from the hpod agent: frame: not a JSON object",
          "hpodd refused a frame from the hpod agent: lifecycle: field 'message' must be a string",
          "Lifecycle scripts Running"}));
}

TEST_F(AgentServiceTest, AHeartbeatWithUnreadableHostFiguresStillCounts) {
  std::string secret;
  auto ws = Register(&secret);
  const json good = {{"memory_total_bytes", 1 << 30}, {"memory_available_bytes", 1 << 29}};
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", 1}, {"host", good}}.dump(), false).ok());
  ASSERT_TRUE(WaitFor([&] { return agents_->Liveness(kNode1).last_heartbeat.has_value(); }));
  auto host = [&]() -> std::optional<AgentHostFigures> {
    for (const auto& a : agents_->Snapshot()) {
      if (a.instance_id == kNode1 && a.host) return *a.host;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(host().has_value());
  EXPECT_EQ(host()->memory_total_bytes, 1 << 30);

  // A negative size (what an overflowing statvfs product sent) spoils the host
  // figures only: the heartbeat counts, or the node would be taken for dead.
  clock_.AdvanceTime(seconds(5));
  const json bad = {{"filesystems", json::array({{{"mountpoint", "/fsx"}, {"size_bytes", -1}}})}};
  for (int seq = 2; seq <= 4; ++seq) {
    ASSERT_TRUE(
        ws->Send(json{{"type", "heartbeat"}, {"seq", seq}, {"host", bad}}.dump(), false).ok());
  }
  // Said once per connection: the frame after the first answer is get_config's.
  json error = Next(*ws);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["frame_type"], "heartbeat.host");
  EXPECT_EQ(error["message"],
            "heartbeat: field 'host.filesystems[0].size_bytes' must not be negative (the "
            "heartbeat counts; its host figures are dropped)");
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["type"], "config_pending");
  EXPECT_EQ(agents_->Liveness(kNode1).last_heartbeat, clock_.SteadyNow());
  EXPECT_FALSE(host().has_value()) << "figures hpodd cannot read are not shown as the last ones";
  EXPECT_EQ(NodeEvents(),
            (std::vector<std::string>{"hpodd refused a frame from the hpod agent: heartbeat: field "
                                      "'host.filesystems[0].size_bytes' must not be negative (the "
                                      "heartbeat counts; its host figures are dropped)"}));
  // A heartbeat refused whole is still reported, under its own type.
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", "x"}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["frame_type"], "heartbeat");
  EXPECT_EQ(NodeEvents().size(), 2u);
}

// Any frame is a sign of life (AgentLiveness::last_read), a frame hpodd refuses
// too; only a heartbeat moves last_heartbeat.
TEST_F(AgentServiceTest, EveryFrameReadIsNotedAsTheAgentsLastSignOfLife) {
  std::string secret;
  auto ws = Register(&secret);
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", 1}}.dump(), false).ok());
  ASSERT_TRUE(WaitFor([&] { return agents_->Liveness(kNode1).last_heartbeat.has_value(); }));
  const auto beat = clock_.SteadyNow();
  EXPECT_EQ(agents_->Liveness(kNode1).last_read, beat);
  clock_.AdvanceTime(seconds(5));
  ASSERT_TRUE(ws->Send(json{{"type", "get_config"}}.dump(), false).ok());
  EXPECT_EQ(Next(*ws)["type"], "config_pending");
  EXPECT_EQ(agents_->Liveness(kNode1).last_read, clock_.SteadyNow());
  EXPECT_EQ(agents_->Liveness(kNode1).last_heartbeat, beat);
  clock_.AdvanceTime(seconds(5));
  ASSERT_TRUE(ws->Send("not json", false).ok());
  EXPECT_EQ(Next(*ws)["type"], "error");
  EXPECT_EQ(agents_->Liveness(kNode1).last_read, clock_.SteadyNow());
  EXPECT_EQ(agents_->Liveness(kNode1).last_heartbeat, beat);
}

// A scrape shows each connected node's latest health verdict and failing
// checks; a reconnect keeps them (the report outlives its connection only for
// that), and a node never reported shows none.
TEST_F(AgentServiceTest, TheSnapshotShowsEachNodesLatestHealthAcrossAReconnect) {
  std::string secret;
  auto ws = Register(&secret);
  auto mine = [&]() -> std::optional<AgentSnapshot> {
    for (auto& a : agents_->Snapshot()) {
      if (a.instance_id == kNode1) return std::move(a);
    }
    return std::nullopt;
  };
  ASSERT_TRUE(mine().has_value());
  EXPECT_EQ(mine()->health_verdict, "") << "no report yet";
  const json failing = {{"type", "health"},
                        {"seq", 1},
                        {"checks", json::array({{{"name", "disk:/fsx"},
                                                 {"result", "fail"},
                                                 {"verdict", "Replace"},
                                                 {"reason", "read-only"}},
                                                {{"name", "slurm"}, {"result", "ok"}}})}};
  ASSERT_TRUE(ws->Send(failing.dump(), false).ok());
  ASSERT_TRUE(WaitFor([&] { return mine()->health_verdict == "Replace"; }));
  EXPECT_EQ(mine()->failing_checks, std::vector<std::string>{"disk:/fsx"});

  ws.reset();
  ASSERT_TRUE(WaitFor([&] { return !agents_->IsConnected(kNode1); }));
  EXPECT_FALSE(mine().has_value()) << "a scrape shows connected agents only";
  auto again = Dial("/agent/v1/channel", kNode1, "HpodNode " + secret);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Send(Hello().dump(), false).ok());
  ASSERT_TRUE(WaitFor([&] { return mine().has_value(); }));
  EXPECT_EQ(mine()->health_verdict, "Replace");
  EXPECT_EQ(mine()->failing_checks, std::vector<std::string>{"disk:/fsx"});

  json passing = failing;
  passing["seq"] = 2;
  passing["checks"][0]["result"] = "ok";
  ASSERT_TRUE((*again)->Send(passing.dump(), false).ok());
  ASSERT_TRUE(WaitFor([&] { return mine()->health_verdict == "Healthy"; }));
  EXPECT_TRUE(mine()->failing_checks.empty());
}

// A job_query reaches the job handler with the asking node's clock offset, so
// that the times the node read (job_health's `since`) are moved onto hpodd's.
TEST_F(AgentServiceTest, AJobQueryCarriesTheNodesClockOffset) {
  std::mutex mu;
  std::vector<std::optional<double>> offsets;
  agents_->SetJobHandler(
      [&](const std::string& cluster_id, const json& request, std::optional<double> offset) {
        EXPECT_EQ(cluster_id, "abcdefabcdef");
        EXPECT_EQ(request["op"], "job_health");
        std::lock_guard<std::mutex> l(mu);
        offsets.push_back(offset);
        return json{{"verdict", "healthy"}};
      });
  std::string secret;
  auto ws = Register(&secret);
  auto ask = [&](const std::string& id) {
    json q = {{"type", "job_query"},
              {"id", id},
              {"request", {{"op", "job_health"}, {"nodes", {"w1"}}, {"since", 1}}}};
    ASSERT_TRUE(ws->Send(q.dump(), false).ok());
    json answer = Next(*ws);
    EXPECT_EQ(answer["type"], "job_answer");
    EXPECT_EQ(answer["id"], id);
  };
  ask("q-1");  // no heartbeat with `time` yet: unknown
  ASSERT_TRUE(
      ws->Send(json{{"type", "heartbeat"}, {"seq", 1}, {"time", 1700000090.5}}.dump(), false).ok());
  ask("q-2");  // handled after the heartbeat (frames are handled in order)
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(offsets.size(), 2u);
  EXPECT_FALSE(offsets[0].has_value());
  ASSERT_TRUE(offsets[1].has_value());
  EXPECT_DOUBLE_EQ(*offsets[1], 90.5);  // the fake clock reads 1700000000
}

TEST_F(AgentServiceTest, HelloOfAnotherProtocolVersionIsRefused) {
  std::string secret;
  Register(&secret)->Close();
  for (const json& hello :
       {Hello(2), json{{"type", "hello"}, {"protocol_version", "1"}, {"agent_version", "t"}}}) {
    auto ws = Dial("/agent/v1/channel", kNode1, "HpodNode " + secret);
    ASSERT_TRUE(ws.ok()) << ws.status().ToString();
    ASSERT_TRUE((*ws)->Send(hello.dump(), false).ok());
    json error = Next(**ws);
    EXPECT_EQ(error["type"], "error");
    EXPECT_EQ(error["frame_type"], "hello");
    const std::string message = error["message"];
    if (hello["protocol_version"].is_number()) {
      EXPECT_EQ(message,
                "agent protocol version 2 is not supported: hpodd speaks version 1 (upgrade the "
                "agent or hpodd so that they match)");
    } else {
      EXPECT_EQ(message,
                "hpodd speaks agent protocol version 1 and cannot read this hello: hello: field "
                "'protocol_version' must be an integer");
    }
    // Then hpodd closes the channel.
    EXPECT_EQ((*ws)->Receive(kWait).status().code(), StatusCode::kUnavailable);
  }
}

TEST_F(AgentServiceTest, DisconnectRecordsAnEventAndWakesTheReconciler) {
  std::string secret;
  auto ws = Register(&secret);
  {
    std::lock_guard<std::mutex> l(mu_);
    changed_.clear();
  }
  // A connection replaced by a newer one is not a disconnect of the node.
  auto second = Dial("/agent/v1/channel", kNode1, "HpodNode " + secret);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(ws->Receive(kWait).status().code(), StatusCode::kUnavailable);
  (*second)->Close();
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> l(mu_);
    return !changed_.empty();
  }));
  ASSERT_TRUE(WaitFor([&] { return !agents_->Liveness(kNode1).connected; }));
  {
    std::lock_guard<std::mutex> l(mu_);
    EXPECT_EQ(changed_, std::vector<std::string>{"abcdefabcdef"});
  }
  EXPECT_EQ(NodeEvents(), std::vector<std::string>{"hpod agent on the instance disconnected"});
}

// The Slurm reconciler's resends: the same message goes out once per interval, a
// different one at once, and a new connection gets it at once.
TEST_F(AgentServiceTest, TheSameMessageIsResentOncePerIntervalAndAtOnceOnAReconnect) {
  std::string secret;
  auto ws = Register(&secret);
  const json a{{"type", "slurm"}, {"conf_hash", "a"}};
  const json b{{"type", "slurm"}, {"conf_hash", "b"}};
  const std::chrono::milliseconds every(3000);
  EXPECT_TRUE(agents_->SendUnlessRecent(kNode1, a, every));
  EXPECT_FALSE(agents_->SendUnlessRecent(kNode1, a, every));
  EXPECT_TRUE(agents_->SendUnlessRecent(kNode1, b, every));
  clock_.AdvanceTime(std::chrono::milliseconds(2999));
  EXPECT_FALSE(agents_->SendUnlessRecent(kNode1, b, every));
  clock_.AdvanceTime(std::chrono::milliseconds(1));
  EXPECT_TRUE(agents_->SendUnlessRecent(kNode1, b, every));
  // Another type is remembered apart.
  EXPECT_TRUE(
      agents_->SendUnlessRecent(kNode1, json{{"type", "other"}, {"conf_hash", "b"}}, every));
  EXPECT_EQ(Next(*ws)["conf_hash"], "a");
  EXPECT_EQ(Next(*ws)["conf_hash"], "b");
  EXPECT_EQ(Next(*ws)["conf_hash"], "b");
  EXPECT_EQ(Next(*ws)["type"], "other");

  ws->Close();
  ASSERT_TRUE(WaitFor([&] { return !agents_->Liveness(kNode1).connected; }));
  EXPECT_FALSE(agents_->SendUnlessRecent(kNode1, b, every));  // not connected
  auto again = Dial("/agent/v1/channel", kNode1, "HpodNode " + secret);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Send(Hello().dump(), false).ok());
  ASSERT_TRUE((*again)->Send(json{{"type", "get_config"}}.dump(), false).ok());
  EXPECT_EQ(Next(**again)["type"], "config_pending");
  EXPECT_TRUE(agents_->SendUnlessRecent(kNode1, b, every));
  EXPECT_EQ(Next(**again)["conf_hash"], "b");
}

// A message whose handling waits for the store (a reconciler's long write) must
// not stop the connection's reading: the heartbeat behind it counts when it
// comes, not once the store is free. Handled on the I/O thread, it was not read
// until the lifecycle write ended; at 10,000 nodes such waits held every I/O
// thread, and new agents could not even connect.
TEST_F(AgentServiceTest, AHeartbeatCountsWhileAnEarlierMessageWaitsForTheStore) {
  std::string secret;
  auto ws = Register(&secret);
  std::promise<void> holding, release;
  std::shared_future<void> gate = release.get_future().share();
  std::thread writer([&] {
    EXPECT_TRUE(store_
                    ->Write([&](store::WriteTx&) -> Status {
                      holding.set_value();
                      gate.wait();
                      return OkStatus();
                    })
                    .ok());
  });
  holding.get_future().wait();
  ASSERT_TRUE(ws->Send(json{{"type", "lifecycle"}, {"state", "Running"}}.dump(), false).ok());
  clock_.AdvanceTime(seconds(7));
  const auto beat = clock_.SteadyNow();
  ASSERT_TRUE(ws->Send(json{{"type", "heartbeat"}, {"seq", 1}}.dump(), false).ok());
  EXPECT_TRUE(WaitFor([&] { return agents_->Liveness(kNode1).last_heartbeat == beat; }));
  release.set_value();
  writer.join();
  EXPECT_TRUE(WaitFor([&] { return AgentOf(kNode1).lifecycle_state == "Running"; }));
}

}  // namespace
}  // namespace hpod::controlplane
