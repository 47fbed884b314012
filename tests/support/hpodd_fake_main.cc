// hpodd-fake: hpodd with the scripted fake provider, for tests and benchmarks
// only. It is not installed and not offered to users; the fake provider is
// configured through HPOD_FAKE_* environment variables so hpodd's own flags stay
// exactly those of the real daemon:
//   HPOD_FAKE_STATE_DIR    nodes persist here (survive kill -9 of the daemon)
//   HPOD_FAKE_PENDING_MS   how long a node stays Pending (default 200)
//   HPOD_FAKE_FAIL_GROUPS  comma-separated instance groups whose nodes fail
//   HPOD_FAKE_CAPACITY     most nodes the provider will hold
//   HPOD_FAKE_AGENT_DIR    nodes run (simulated) agents: their configs go here,
//                          for hpod-nodesim (tests/support/nodesim/)
//   HPOD_FAKE_AGENT_URL    with HPOD_FAKE_AGENT_DIR: the agents are network agents
//                          that join and dial this https://127.0.0.1:PORT over
//                          mutual TLS (hpodd listens there); unset: the agent socket

#include <cstdlib>
#include <sstream>

#include "hpod/provider/fake/fake_provider.h"
#include "hpodd_main.h"

namespace {

hpod::StatusOr<std::unique_ptr<hpod::provider::Provider>> MakeFake(
    const hpod::Clock& clock, const hpod::cmd::ProviderContext& ctx) {
  hpod::provider::FakeProviderOptions o;
  if (const char* v = std::getenv("HPOD_FAKE_STATE_DIR")) o.state_dir = v;
  o.pending_for = std::chrono::milliseconds(200);
  if (const char* v = std::getenv("HPOD_FAKE_PENDING_MS")) {
    o.pending_for = std::chrono::milliseconds(std::atoi(v));
  }
  if (const char* v = std::getenv("HPOD_FAKE_FAIL_GROUPS")) {
    std::stringstream ss(v);
    std::string g;
    while (std::getline(ss, g, ',')) {
      if (!g.empty()) o.fail_groups.insert(g);
    }
  }
  if (const char* v = std::getenv("HPOD_FAKE_CAPACITY")) o.capacity = std::atoi(v);
  if (const char* v = std::getenv("HPOD_FAKE_AGENT_DIR"); v != nullptr && *v != '\0') {
    o.agent_dir = v;
    o.agent_endpoint = "unix://" + ctx.agent_socket;
    if (const char* url = std::getenv("HPOD_FAKE_AGENT_URL"); url != nullptr && *url != '\0') {
      o.agent_endpoint = url;
    }
  }
  return std::unique_ptr<hpod::provider::Provider>(
      std::make_unique<hpod::provider::FakeProvider>(clock, o));
}

}  // namespace

int main(int argc, char** argv) {
  return hpod::cmd::HpoddMain(argc, argv, {{"fake", "fake (tests only)", MakeFake}});
}
