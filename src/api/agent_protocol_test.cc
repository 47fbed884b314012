#include "hpod/api/agent_protocol.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace hpod::api::agentproto {
namespace {

using nlohmann::json;

LifecycleState FullLifecycle() { return {"Failed", 3, "Lifecycle script on_create.sh exited"}; }
SlurmStatus FullSlurm() {
  return {"compute", "abc", "restarting", 2, "slurmd was killed", 1700000000.5, true};
}
SlurmNodeEntry FullNode() { return {"ip-10-0-0-1", "IDLE+DRAIN", "hpod: removing", "None"}; }
S3Config FullS3() {
  return {"http://127.0.0.1:8080", "us-east-1", "AK", "SK", "/run/hpod/s3.sock"};
}
HealthCheck FullCheck() {
  return {"disk:/", "fail", "Replace", "/ has 1 MiB free (< 16 MiB)", 3, 1700000000.25};
}
LifecycleConfig FullLifecycleConfig() {
  return {"file:///srv/lcs/",
          "on_create.sh",
          99,
          FullS3(),
          {{"on_create.sh", "#!/bin/bash\necho hi\n"}, {"utils/x.bin", std::string("\0\xff", 2)}},
          {"on_create.sh"}};
}
SharedFilesystem FullSharedFs() {
  return {"fuse.sshfs", "10.0.0.9:/srv/fsx", "directport=2222", ".hpod-fsx-abc", "v", true};
}
HostCpuSeconds FullCpu() { return {10.5, 0.25, 3, 1000.75, 2, 0.5, 0.125, 0}; }
HostFilesystem FullFilesystem() { return {"/fsx", 1 << 30, 1 << 29}; }
HostStats FullHost() {
  return {
      FullCpu(), 8LL << 30, 6LL << 30, {HostFilesystem{"/", 4 << 20, 1 << 20}, FullFilesystem()}};
}

TrainingRun FullRun() { return {"/fsx/runs/a/tb", "tensorboard", 1700000000.5, 4096}; }
TrainingPoint FullPoint() { return {3, 1700000001.25, 2.5}; }
TrainingSeries FullSeries() { return {"train/loss", {FullPoint()}}; }
TrainingResult FullTrainingResult() {
  return {"t-1", false, "INVALID_ARGUMENT", "bad path", {FullRun()}, {FullSeries()}, {"w"}};
}
// One value of every message with every field set (so ToJson writes them all).
Hello FullHello() {
  return {kProtocolVersion,
          "0.1.0",
          "ip-10-0-0-1",
          "10.0.0.1",
          "boot",
          FullLifecycle(),
          {{"hpod-agent", std::string(64, 'a')}}};
}
Heartbeat FullHeartbeat() {
  return {7, FullLifecycle(), 42, FullSlurm(), FullHost(), "", 1700000003.75};
}
Command FullCommand() { return {"c-1", {"sh", "-c", "echo $X"}, {{"X", "1"}}, "/tmp", 5000}; }
SlurmRole FullSlurmRole() {
  return {"controller",
          "ip-10-0-0-1",
          "10.0.0.1",
          "a2V5",
          "h",
          {"ip-10-0-0-2"},
          "motd",
          {{"slurm.conf", "x"}},
          8,
          "/run/hpod-gpus",
          "2026-12-04T19:37:47",
          {{"ip-10-0-0-1", "10.0.0.1"}, {"ip-10-0-0-2", "10.0.0.2"}},
          "-----BEGIN OPENSSH PRIVATE KEY-----\n...",
          "ip-10-0-0-1,10.0.0.1 ssh-ed25519 AAAA\n",
          true,
          true};
}
Config FullConfig() {
  return {1234, FullLifecycleConfig(), json{{"ClusterConfig", {{"ClusterName", "demo"}}}},
          json{{"controller_group", "c"}}};
}

// type → a full example of that message, as ToJson writes it.
std::map<std::string, json> FullMessages() {
  std::map<std::string, json> m;
  for (const json& j : {FullHello().ToJson(),
                        GetConfig{}.ToJson(),
                        FullHeartbeat().ToJson(),
                        LifecycleReport{FullLifecycle()}.ToJson(),
                        Log{"Agent", "x"}.ToJson(),
                        ProvisioningParameters{json{{"a", 1}}}.ToJson(),
                        SlurmStateReport{FullSlurm()}.ToJson(),
                        SlurmNodes{{FullNode()}}.ToJson(),
                        HealthReport{4, {FullCheck()}}.ToJson(),
                        CommandResult{"c-1", 0, "o", "e", true, "err"}.ToJson(),
                        JobQuery{"q-1", json{{"op", "job_health"}}}.ToJson(),
                        JobAnswer{"q-1", json{{"verdict", "healthy"}}}.ToJson(),
                        Credential{"s"}.ToJson(),
                        RenewCertificate{"-----BEGIN CERTIFICATE REQUEST-----"}.ToJson(),
                        Certificate{"-----BEGIN CERTIFICATE-----", 1.8e9}.ToJson(),
                        HostAssign{"i-0123456789abcdef0", FullSharedFs()}.ToJson(),
                        HostStatus{"i-1", "slurmd would not start", true, true, true}.ToJson(),
                        HostReboot{"rcv-1"}.ToJson(),
                        HostFault{"partition", 5}.ToJson(),
                        FullConfig().ToJson(),
                        ConfigPending{300}.ToJson(),
                        FullCommand().ToJson(),
                        OpenSession{"s-1", {"bash"}, 30, 100, false, "alice", true}.ToJson(),
                        FullSlurmRole().ToJson(),
                        Reprovision{}.ToJson(),
                        Error{"heartbeat", "heartbeat: field 'seq' must be an integer"}.ToJson(),
                        TrainingQuery{"t-1", "read_run", "/fsx/runs/a/tb", 100}.ToJson(),
                        FullTrainingResult().ToJson()}) {
    m[j["type"].get<std::string>()] = j;
  }
  return m;
}

// Nested object name (as PROTOCOL.md's headings spell it) → a full example.
std::map<std::string, json> FullObjects() {
  return {{"LifecycleState", FullLifecycle().ToJson()},
          {"SlurmStatus", FullSlurm().ToJson()},
          {"SlurmNodeEntry", FullNode().ToJson()},
          {"HealthCheck", FullCheck().ToJson()},
          {"LifecycleConfig", FullLifecycleConfig().ToJson()},
          {"S3Config", FullS3().ToJson()},
          {"SharedFilesystem", FullSharedFs().ToJson()},
          {"HostStats", FullHost().ToJson()},
          {"HostCpuSeconds", FullCpu().ToJson()},
          {"HostFilesystem", FullFilesystem().ToJson()},
          {"TrainingRun", FullRun().ToJson()},
          {"TrainingSeries", FullSeries().ToJson()},
          {"TrainingPoint", FullPoint().ToJson()}};
}

template <typename T>
void ExpectRoundTrip(const T& value) {
  json j = value.ToJson();
  auto back = T::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << " for " << j.dump();
  EXPECT_EQ(*back, value) << j.dump();
  // And through the wire's text.
  auto reparsed = T::FromJson(json::parse(j.dump()));
  ASSERT_TRUE(reparsed.ok());
  EXPECT_EQ(*reparsed, value);
}

TEST(AgentProtocolTest, EveryMessageRoundTrips) {
  ExpectRoundTrip(FullLifecycle());
  ExpectRoundTrip(FullSlurm());
  ExpectRoundTrip(SlurmStatus{"compute", "abc", "running", 0, "", std::nullopt});
  ExpectRoundTrip(FullNode());
  ExpectRoundTrip(FullS3());
  ExpectRoundTrip(FullLifecycleConfig());
  ExpectRoundTrip(LifecycleConfig{"file:///x/", "a.sh", 1, std::nullopt, {}, {}});
  ExpectRoundTrip(FullHello());
  ExpectRoundTrip(Hello{1, "v", "", "", "", std::nullopt});
  ExpectRoundTrip(GetConfig{});
  ExpectRoundTrip(FullHeartbeat());
  ExpectRoundTrip(Heartbeat{1, std::nullopt, 0, std::nullopt, std::nullopt});
  ExpectRoundTrip(FullHost());
  ExpectRoundTrip(HostStats{});
  ExpectRoundTrip(FullCpu());
  ExpectRoundTrip(FullFilesystem());
  ExpectRoundTrip(LifecycleReport{FullLifecycle()});
  ExpectRoundTrip(Log{"LifecycleConfig", "line\n"});
  ExpectRoundTrip(ProvisioningParameters{json{{"unparsable", "{"}}});
  ExpectRoundTrip(ProvisioningParameters{nullptr});
  ExpectRoundTrip(SlurmStateReport{FullSlurm()});
  ExpectRoundTrip(SlurmNodes{{FullNode(), SlurmNodeEntry{"n2", "IDLE", "", "1"}}});
  ExpectRoundTrip(SlurmNodes{});
  ExpectRoundTrip(FullCheck());
  ExpectRoundTrip(
      HealthReport{1, {FullCheck(), HealthCheck{"gpu", "skipped", "Healthy", "", 0, 0}}});
  ExpectRoundTrip(HealthReport{});
  ExpectRoundTrip(CommandResult{"c-1", 4, "o", "e", false, ""});
  ExpectRoundTrip(JobQuery{"q-7", json{{"op", "job_event"}, {"attempt", 1}}});
  ExpectRoundTrip(JobAnswer{"q-7", json{{"ok", true}}});
  ExpectRoundTrip(Credential{"secret"});
  ExpectRoundTrip(RenewCertificate{"csr"});
  ExpectRoundTrip(Certificate{"pem", 1.8e9});
  ExpectRoundTrip(HostAssign{"i-1", FullSharedFs()});
  ExpectRoundTrip(HostAssign{"", std::nullopt});
  ExpectRoundTrip(HostStatus{"i-1", "", true, false, true});
  ExpectRoundTrip(HostStatus{"", "/fsx is not mounted", false, true});
  ExpectRoundTrip(HostReboot{"rcv-2"});
  ExpectRoundTrip(HostFault{"flag-file", 0});
  ExpectRoundTrip(FullConfig());
  ExpectRoundTrip(Config{std::nullopt, std::nullopt, json::object(), nullptr});
  ExpectRoundTrip(ConfigPending{300});
  ExpectRoundTrip(FullCommand());
  ExpectRoundTrip(Command{"c-2", {"true"}, {}, "", 30000});
  ExpectRoundTrip(OpenSession{"s-1", {}, 24, 80, true});
  ExpectRoundTrip(OpenSession{"s-1", {"bash", "-lc", "id"}, 24, 80, false, "alice"});
  ExpectRoundTrip(FullSlurmRole());
  ExpectRoundTrip(SlurmRole{"compute", "n", "10.0.0.1", "k", "h", {}, "", {}, 0, ""});
  ExpectRoundTrip(Reprovision{});
  ExpectRoundTrip(Error{"", "frame: not a JSON object"});
}

TEST(AgentProtocolTest, WireFormatKeepsTodaysFieldNames) {
  EXPECT_EQ(Command({"c-1", {"echo", "x"}, {}, "", 5000}).ToJson().dump(),
            R"({"argv":["echo","x"],"id":"c-1","timeout_ms":5000,"type":"command"})");
  EXPECT_EQ(CommandResult({"c-1", 0, "x\n", "", false, ""}).ToJson().dump(),
            R"({"error":"","exit_code":0,"id":"c-1","stderr":"","stdout":"x\n",)"
            R"("timed_out":false,"type":"command_result"})");
  EXPECT_EQ(Heartbeat({3, std::nullopt, 9, std::nullopt, std::nullopt}).ToJson().dump(),
            R"({"seq":3,"type":"heartbeat","uptime_s":9})");
  // A compute node's role carries no files and no stand-in GPUs.
  json compute = SlurmRole{"compute", "n", "a", "k", "h", {}, "m", {}, 0, ""}.ToJson();
  EXPECT_FALSE(compute.contains("files"));
  EXPECT_FALSE(compute.contains("stand_in_gpus"));
  EXPECT_FALSE(compute.contains("gpu_device_dir"));
  EXPECT_TRUE(Config{}.ToJson()["lifecycle"].is_null());
}

struct BadCase {
  std::string name;
  StatusOr<bool> parsed;
  std::string want;
};

template <typename T>
StatusOr<bool> Parse(const char* text) {
  auto r = T::FromJson(json::parse(text));
  if (!r.ok()) return r.status();
  return true;
}

TEST(AgentProtocolTest, MalformedFieldsAreNamed) {
  const std::vector<BadCase> cases = {
      {"not an object", Parse<Heartbeat>("[1]"), "heartbeat: not a JSON object"},
      {"wrong type", Parse<Heartbeat>(R"({"type":"heartbeat","seq":"7"})"),
       "heartbeat: field 'seq' must be an integer"},
      {"missing", Parse<Heartbeat>(R"({"type":"heartbeat"})"), "heartbeat: field 'seq' is missing"},
      {"other type", Parse<Heartbeat>(R"({"type":"hello","seq":1})"),
       "heartbeat: field 'type' must be \"heartbeat\""},
      {"nested", Parse<Heartbeat>(R"({"seq":1,"lifecycle":{"state":"Running","exit_code":"0"}})"),
       "heartbeat: field 'lifecycle.exit_code' must be an integer"},
      {"nested object", Parse<Heartbeat>(R"({"seq":1,"slurm":"up"})"),
       "heartbeat: field 'slurm' must be an object"},
      {"host memory", Parse<HostStats>(R"({"memory_total_bytes":1.5})"),
       "host: field 'memory_total_bytes' must be an integer"},
      {"host filesystem", Parse<HostStats>(R"({"filesystems":[{"mountpoint":"/"},{}]})"),
       "host: field 'filesystems[1].mountpoint' is missing"},
      {"bad state", Parse<LifecycleReport>(R"({"type":"lifecycle","state":"Done"})"),
       "lifecycle: field 'state' must be one of NotStarted, Running, Succeeded, Failed"},
      {"hello agent missing", Parse<Hello>(R"({"type":"hello","protocol_version":1})"),
       "hello: field 'agent_version' is missing"},
      {"hello version type", Parse<Hello>(R"({"protocol_version":"1","agent_version":"1"})"),
       "hello: field 'protocol_version' must be an integer"},
      {"hello agent", Parse<Hello>(R"({"protocol_version":1,"agent_version":2})"),
       "hello: field 'agent_version' must be a string"},
      {"hello software", Parse<Hello>(R"({"agent_version":"1","software":{"hpod-agent":1}})"),
       "hello: field 'software.hpod-agent' must be a string"},
      {"log", Parse<Log>(R"({"stream":"Agent"})"), "log: field 'data' is missing"},
      {"nodes", Parse<SlurmNodes>(R"({"nodes":{}})"),
       "slurm_nodes: field 'nodes' must be an array"},
      {"node entry", Parse<SlurmNodes>(R"({"nodes":[{"name":"a"},{"name":1}]})"),
       "slurm_nodes: field 'nodes[1].name' must be a string"},
      {"health checks", Parse<HealthReport>(R"({"type":"health","seq":1})"),
       "health: field 'checks' is missing"},
      {"health result type", Parse<HealthReport>(R"({"checks":[{"name":"gpu","result":1}]})"),
       "health: field 'checks[0].result' must be a string"},
      {"health result", Parse<HealthReport>(R"({"checks":[{"name":"a","result":"ok"},
                                   {"name":"gpu","result":"bad"}]})"),
       "health: field 'checks[1].result' must be one of ok, fail, timeout, skipped (not 'bad')"},
      {"health verdict",
       Parse<HealthReport>(R"({"checks":[{"name":"gpu","result":"fail","verdict":"Reset"}]})"),
       "health: field 'checks[0].verdict' must be one of Healthy, Reboot, Replace (not 'Reset')"},
      {"health name", Parse<HealthReport>(R"({"checks":[{"result":"ok"}]})"),
       "health: field 'checks[0].name' is missing"},
      {"health time", Parse<HealthReport>(R"({"checks":[{"name":"a","result":"ok","time":"1"}]})"),
       "health: field 'checks[0].time' must be a number"},
      {"health check", Parse<HealthCheck>(R"({"name":"a"})"),
       "health check: field 'result' is missing"},
      {"result", Parse<CommandResult>(R"({"id":"c","timed_out":1})"),
       "command_result: field 'timed_out' must be a boolean"},
      {"job query", Parse<JobQuery>(R"({"id":"q-1","request":"health"})"),
       "job_query: field 'request' must be an object"},
      {"job answer", Parse<JobAnswer>(R"({"answer":{}})"), "job_answer: field 'id' is missing"},
      {"slurm state", Parse<SlurmStateReport>(R"({"daemon":"running","restarts":"1"})"),
       "slurm_state: field 'restarts' must be an integer"},
      {"slurmd started",
       Parse<SlurmStateReport>(R"({"daemon":"running","slurmd_started":"2024-01-01"})"),
       "slurm_state: field 'slurmd_started' must be a number"},
      {"heartbeat time", Parse<Heartbeat>(R"({"seq":1,"time":"now"})"),
       "heartbeat: field 'time' must be a number"},
      {"credential", Parse<Credential>(R"({"type":"credential"})"),
       "credential: field 'secret' is missing"},
      {"config s3", Parse<Config>(R"({"lifecycle":{"source_s3_uri":"s3://b/","on_create":"x",
                                   "s3":{"region":5}}})"),
       "config: field 'lifecycle.s3.region' must be a string"},
      {"config rc", Parse<Config>(R"({"resource_config":[]})"),
       "config: field 'resource_config' must be an object"},
      {"pending", Parse<ConfigPending>(R"({"retry_ms":0.5})"),
       "config_pending: field 'retry_ms' must be an integer"},
      {"argv", Parse<Command>(R"({"id":"c","argv":["a",1]})"),
       "command: field 'argv[1]' must be a string"},
      {"env", Parse<Command>(R"({"id":"c","argv":["a"],"env":{"X":1}})"),
       "command: field 'env.X' must be a string"},
      {"session", Parse<OpenSession>(R"({"session_id":"s","rows":-1})"),
       "open_session: field 'rows' must be 0..65535"},
      {"slurm files", Parse<SlurmRole>(R"({"role":"compute","node_name":"n",
                                   "controller_addr":"a","munge_key":"k","files":{"a":3}})"),
       "slurm: field 'files.a' must be a string"},
      {"slurm missing", Parse<SlurmRole>(R"({"role":"compute"})"),
       "slurm: field 'node_name' is missing"},
      {"error", Parse<Error>(R"({"frame_type":"x"})"), "error: field 'message' is missing"},
      {"frame type", MessageType(json::parse(R"({"type":3})")).status(),
       "frame: field 'type' must be a string"},
  };
  for (const auto& c : cases) {
    ASSERT_FALSE(c.parsed.ok()) << c.name;
    EXPECT_EQ(c.parsed.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(std::string(c.parsed.status().message()).rfind(c.want, 0), 0u)
        << c.name << ": " << c.parsed.status().message();
  }
  // Null reads as absent; unknown fields are ignored.
  auto h = Heartbeat::FromJson(json::parse(R"({"seq":1,"lifecycle":null,"new_field":[1]})"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_FALSE(h->lifecycle.has_value());
  EXPECT_FALSE(h->host.has_value());  // an agent older than `host`
  EXPECT_EQ(*MessageType(json::parse(R"({"type":"log"})")), "log");
  // A hello without a version comes from an agent older than the field: version 1.
  EXPECT_EQ(Hello::FromJson(json::parse(R"({"agent_version":"0.0.9"})"))->protocol_version, 1);
}

TEST(AgentProtocolTest, UnreadableHostFiguresCostOnlyTheFigures) {
  // The heartbeat keeps the node alive: a `host` hpodd cannot read is dropped
  // and said why, the rest of the heartbeat reads.
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"memory_total_bytes":1.5})",
       "heartbeat: field 'host.memory_total_bytes' must be an integer"},
      {R"({"cpu_seconds":{"idle":"1"}})",
       "heartbeat: field 'host.cpu_seconds.idle' must be a number"},
      {R"({"cpu_seconds":{"user":-1}})",
       "heartbeat: field 'host.cpu_seconds.user' must not be negative"},
      {R"({"filesystems":{}})", "heartbeat: field 'host.filesystems' must be an array"},
      {R"({"filesystems":[{"mountpoint":"/"},{"size_bytes":1}]})",
       "heartbeat: field 'host.filesystems[1].mountpoint' is missing"},
      {R"({"filesystems":[{"mountpoint":"/fsx","size_bytes":-9223372036854775808}]})",
       "heartbeat: field 'host.filesystems[0].size_bytes' must not be negative"},
      {R"("busy")", "heartbeat: field 'host' must be an object"}};
  for (const auto& [host, want] : cases) {
    const std::string text =
        std::string(R"({"type":"heartbeat","seq":9,"uptime_s":3,"slurm":{"daemon":"running"},)") +
        R"("host":)" + host + "}";
    auto h = Heartbeat::FromJson(json::parse(text));
    ASSERT_TRUE(h.ok()) << host << ": " << h.status().ToString();
    EXPECT_EQ(h->seq, 9);
    EXPECT_EQ(h->uptime_s, 3);
    EXPECT_TRUE(h->slurm.has_value());
    EXPECT_FALSE(h->host.has_value()) << host;
    EXPECT_EQ(h->host_error, want) << host;
  }
  // The rest of a heartbeat is still read strictly.
  EXPECT_FALSE(Heartbeat::FromJson(json::parse(R"({"seq":"9","host":{}})")).ok());
  auto fine = Heartbeat::FromJson(json::parse(R"({"seq":1,"host":{"memory_total_bytes":5}})"));
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->host_error, "");
  EXPECT_EQ(fine->host->memory_total_bytes, 5);
}

TEST(AgentProtocolTest, HostKeepsOnlyTheNodeDiskAndFsxOnce) {
  // Every other mountpoint would be a series hpodd exports for ever.
  json j = {{"filesystems", json::array()}};
  for (int i = 0; i < 1000; ++i) {
    j["filesystems"].push_back({{"mountpoint", "/mnt/" + std::to_string(i)}, {"size_bytes", i}});
  }
  j["filesystems"].push_back({{"mountpoint", "/fsx"}, {"size_bytes", 7}});
  j["filesystems"].push_back({{"mountpoint", "/fsx"}, {"size_bytes", 8}});
  j["filesystems"].push_back({{"mountpoint", "/"}, {"size_bytes", 9}});
  auto h = HostStats::FromJson(j);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->filesystems, (std::vector<HostFilesystem>{{"/fsx", 7, 0}, {"/", 9, 0}}));
  EXPECT_TRUE(IsHostMountpoint("/"));
  EXPECT_FALSE(IsHostMountpoint("/fsx/"));
}

// PROTOCOL.md, parsed: heading "### `name` (agent → hpodd | hpodd → agent | object)"
// followed by table rows "| `field` | …".
struct Documented {
  std::map<std::string, std::set<std::string>> messages, objects;
};

Documented ReadProtocolDoc() {
  std::ifstream in(HPOD_AGENT_PROTOCOL_MD);
  EXPECT_TRUE(in.good()) << HPOD_AGENT_PROTOCOL_MD;
  Documented doc;
  std::set<std::string>* current = nullptr;
  std::string line;
  auto quoted = [](const std::string& s, size_t from) -> std::string {
    size_t a = s.find('`', from);
    size_t b = a == std::string::npos ? a : s.find('`', a + 1);
    return b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
  };
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      current = nullptr;
      if (line.rfind("### `", 0) != 0) continue;
      std::string name = quoted(line, 0);
      if (line.find("(object)") != std::string::npos) {
        current = &doc.objects[name];
      } else if (line.find("agent → hpodd") != std::string::npos ||
                 line.find("hpodd → agent") != std::string::npos) {
        current = &doc.messages[name];
      }
    } else if (current != nullptr && line.rfind("| `", 0) == 0) {
      current->insert(quoted(line, 0));
    }
  }
  return doc;
}

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) {
    if (k != "type") keys.insert(k);
  }
  return keys;
}

TEST(AgentProtocolTest, ProtocolDocMatchesTheStructs) {
  Documented doc = ReadProtocolDoc();
  std::set<std::string> types(kMessageTypes.begin(), kMessageTypes.end());
  std::set<std::string> documented;
  for (const auto& [name, fields] : doc.messages) documented.insert(name);
  EXPECT_EQ(documented, types) << "PROTOCOL.md's message sections vs kMessageTypes";
  auto messages = FullMessages();
  EXPECT_EQ(messages.size(), types.size()) << "a message without a full example here";
  for (const auto& [type, example] : messages) {
    EXPECT_TRUE(types.count(type)) << type << " is missing from kMessageTypes";
    EXPECT_EQ(doc.messages[type], Keys(example)) << "fields of `" << type << "` in PROTOCOL.md";
  }
  for (const auto& [name, example] : FullObjects()) {
    ASSERT_TRUE(doc.objects.count(name)) << "PROTOCOL.md has no `" << name << "` (object)";
    EXPECT_EQ(doc.objects[name], Keys(example)) << "fields of `" << name << "` in PROTOCOL.md";
  }
  EXPECT_EQ(doc.objects.size(), FullObjects().size());
}

}  // namespace
}  // namespace hpod::api::agentproto
