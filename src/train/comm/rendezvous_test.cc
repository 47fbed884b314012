#include "hpod/train/comm/rendezvous.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

namespace hpod::train::comm {
namespace {

using namespace std::chrono_literals;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// scontrol as a Slurm 22.05 controller answers, with a replaced node: the job's
// node list is current, SLURM_JOB_NODELIST (set at submission) is not.
struct FakeScontrol {
  std::vector<std::vector<std::string>> calls;
  StatusOr<std::string> operator()(const std::vector<std::string>& argv) {
    calls.push_back(argv);
    if (argv == std::vector<std::string>{"scontrol", "show", "job", "42"}) {
      return std::string(
          "JobId=42 JobName=llama\n   ReqNodeList=(null) ExcNodeList=(null)\n"
          "   NodeList=ip-10-77-1-[14-16]\n   BatchHost=ip-10-77-1-14\n");
    }
    if (argv == std::vector<std::string>{"scontrol", "show", "hostnames", "ip-10-77-1-[14-16]"}) {
      return std::string("ip-10-77-1-14\nip-10-77-1-15\nip-10-77-1-16\n");
    }
    return UnavailableError("unexpected command");
  }
};

TEST(ResolveWorldTest, SrunStepTakesRanksFromSlurmAndTheMasterFromScontrol) {
  FakeScontrol scontrol;
  auto w = ResolveWorld({},
                        FakeEnv({{"SLURM_JOB_ID", "42"},
                                 {"SLURM_STEP_ID", "0"},
                                 {"SLURM_PROCID", "2"},
                                 {"SLURM_STEP_NUM_TASKS", "3"},
                                 {"SLURM_NTASKS", "99"},
                                 {"SLURM_LOCALID", "0"},
                                 {"SLURM_JOB_NODELIST", "ip-10-77-1-[11-13]"}}),
                        std::ref(scontrol));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->rank, 2);
  EXPECT_EQ(w->size, 3);
  EXPECT_EQ(w->master_addr, "ip-10-77-1-14");  // not the stale ip-10-77-1-11
  EXPECT_EQ(w->master_port, kDefaultMasterPort);
  EXPECT_EQ(w->run_id, "42.0.0.0");
  EXPECT_EQ(scontrol.calls.size(), 2u);
}

TEST(ResolveWorldTest, InAnImageWithoutSlurmTheMasterIsTheStepsFirstNode) {
  auto no_scontrol = [](const std::vector<std::string>& argv) -> StatusOr<std::string> {
    return NotFoundError("program " + argv[0] + " not found in PATH");
  };
  auto env = FakeEnv({{"SLURM_JOB_ID", "42"},
                      {"SLURM_STEP_ID", "1"},
                      {"SLURM_PROCID", "1"},
                      {"SLURM_STEP_NUM_TASKS", "3"},
                      {"SLURM_STEP_NODELIST", "ip-10-77-1-[14-16]"}});
  auto w = ResolveWorld({}, env, no_scontrol);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->master_addr, "ip-10-77-1-14");
  // Without the step's list, the error still says what to pass.
  w = ResolveWorld({},
                   FakeEnv({{"SLURM_JOB_ID", "42"},
                            {"SLURM_STEP_ID", "1"},
                            {"SLURM_PROCID", "1"},
                            {"SLURM_STEP_NUM_TASKS", "3"}}),
                   no_scontrol);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("pass --master-addr"), std::string::npos);
}

TEST(ResolveWorldTest, ABatchScriptIsOneProcess) {
  FakeScontrol scontrol;
  auto w = ResolveWorld({}, FakeEnv({{"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS", "4"}}),
                        std::ref(scontrol));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->size, 1);
  EXPECT_TRUE(scontrol.calls.empty());
}

TEST(ResolveWorldTest, FlagsWinAndMustComeTogether) {
  FakeScontrol scontrol;
  WorldFlags f;
  f.rank = 1;
  f.world_size = 2;
  f.master_addr = "127.0.0.1";
  f.master_port = 31000;
  auto w =
      ResolveWorld(f, FakeEnv({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "5"}}), std::ref(scontrol));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->rank, 1);
  EXPECT_EQ(w->master_port, 31000);
  f.master_addr.clear();
  auto bad = ResolveWorld(f, FakeEnv({}), std::ref(scontrol));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--master-addr"), std::string::npos);
  f.master_addr = "h";
  f.rank = 2;
  EXPECT_NE(ResolveWorld(f, FakeEnv({}), std::ref(scontrol))
                .status()
                .message()
                .find("--rank 2 must be below --world-size 2"),
            std::string::npos);
}

TEST(ResolveWorldTest, MalformedSlurmValuesAndAMissingNodeList) {
  FakeScontrol scontrol;
  auto bad = ResolveWorld(
      {}, FakeEnv({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}}),
      std::ref(scontrol));
  EXPECT_NE(bad.status().message().find("SLURM_PROCID=x"), std::string::npos);
  auto gone = ResolveWorld({},
                           FakeEnv({{"SLURM_JOB_ID", "7"},
                                    {"SLURM_STEP_ID", "0"},
                                    {"SLURM_PROCID", "0"},
                                    {"SLURM_NTASKS", "2"}}),
                           std::ref(scontrol));
  EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(gone.status().message().find("--master-addr"), std::string::npos);
}

TEST(ParseJobNodeListTest, TakesNodeListNotReqOrExc) {
  EXPECT_EQ(ParseJobNodeList("   ReqNodeList=a ExcNodeList=b\n   NodeList=c[1-2]\n"), "c[1-2]");
  EXPECT_EQ(ParseJobNodeList("JobId=1\n"), "");
}

// Runs Agree on `world` threads over one store; returns each rank's status.
std::vector<Status> AgreeAll(int world, const std::function<nlohmann::json(int)>& agree,
                             int absent = -1) {
  HashStore store;
  std::vector<Status> out(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) {
    if (r == absent) continue;
    ts.emplace_back([&, r] {
      World w;
      w.rank = r;
      w.size = world;
      w.master_addr = "127.0.0.1";
      out[r] = Agree(store, "p", w, "127.0.0.1", agree(r), 300ms, nullptr);
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

TEST(AgreeTest, EqualOptionsAgree) {
  for (const Status& s : AgreeAll(3, [](int) { return nlohmann::json{{"batch_size", 8}}; })) {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

TEST(AgreeTest, ADisagreementNamesTheFieldAndTheRanksOnEveryRank) {
  auto out = AgreeAll(3, [](int r) {
    return nlohmann::json{{"seed", 7}, {"batch_size", r == 2 ? 4 : 8}};
  });
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(),
              "ranks disagree on batch_size: rank 0 has 8, rank 2 has 4; start every rank with "
              "the same options");
  }
}

TEST(AgreeTest, ARankThatNeverArrivesIsNamed) {
  auto out = AgreeAll(
      3, [](int) { return nlohmann::json::object(); }, /*absent=*/1);
  EXPECT_EQ(out[0].code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out[0].message(),
            "rank 1 of 3 never arrived at the rendezvous (master 127.0.0.1:29500) within 0.3 s");
}

TEST(JoinWorldTest, TwoProcessesWorthOfRanksOverTcp) {
  // The whole path of a process: rank 0 serves the store, both connect,
  // agree and connect gloo (ranks as threads, so one process plays both).
  World w0;
  w0.size = 2;
  w0.master_addr = "127.0.0.1";
  w0.master_port = 0;  // replaced below by a free port
  {
    auto probe = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    w0.master_port = (*probe)->port();
  }
  World w1 = w0;
  w1.rank = 1;
  JoinOptions o;
  o.rendezvous_timeout = 10s;
  StatusOr<JoinedWorld> j1 = InternalError("not run");
  std::thread t([&] { j1 = JoinWorld(w1, {{"x", 1}}, o); });
  auto j0 = JoinWorld(w0, {{"x", 1}}, o);
  t.join();
  ASSERT_TRUE(j0.ok()) << j0.status().ToString();
  ASSERT_TRUE(j1.ok()) << j1.status().ToString();
  std::thread t2([&] { EXPECT_TRUE(j1->comm->Barrier().ok()); });
  EXPECT_TRUE(j0->comm->Barrier().ok());
  t2.join();
  EXPECT_EQ(j0->peer_names.size(), 2u);
  EXPECT_NE(j0->peer_names[1].find("rank 1 ("), std::string::npos);
}

}  // namespace
}  // namespace hpod::train::comm
