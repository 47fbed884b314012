// hpodd: the control plane. Providers are chosen here and only here (--provider;
// a new provider is one more entry in main's list).
//
// The local provider runs every node as Linux namespaces on this machine; it
// needs root (network namespaces, bridges, mounts).

#include <unistd.h>

#include <filesystem>

#include "hpod/provider/local/local_provider.h"
#include "hpodd_main.h"

namespace {

namespace fs = std::filesystem;

// A sibling program: installed side by side (bin/), or in the build tree
// (build/cmd/<name>/<name> next to build/cmd/hpodd/hpodd); "" when neither.
std::string FindSibling(const std::string& name) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p :
       {self.parent_path() / name, self.parent_path().parent_path() / name / name}) {
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

// FindSibling, else the bare name (looked up in PATH when run).
std::string FindProgram(const std::string& name) {
  std::string found = FindSibling(name);
  return found.empty() ? name : found;
}

hpod::StatusOr<std::unique_ptr<hpod::provider::Provider>> MakeLocal(
    const hpod::Clock&, const hpod::cmd::ProviderContext& ctx) {
  if (::geteuid() != 0) {
    return hpod::FailedPreconditionError(
        "the local node provider needs root (it creates network namespaces, a bridge and "
        "mounts); run hpodd as root");
  }
  hpod::provider::local::LocalProviderOptions o;
  o.state_dir = (fs::path(ctx.data_dir) / "local").string();
  o.node_block = ctx.node_block;
  o.fsx_root = ctx.fsx_root;
  if (!ctx.link_prefix.empty()) o.link_prefix = ctx.link_prefix;
  o.node_init_binary = FindProgram("hpod-node-init");
  o.agent_binary = FindProgram("hpod-agent");
  o.agent_endpoint = "unix://" + ctx.agent_socket;
  if (ctx.agent_transport == "tls") {
    o.agent_transport = hpod::provider::local::LocalProviderOptions::AgentTransport::kTls;
  }
  o.node_disk_mb = ctx.node_disk_mb;
  // hpod's SPANK plugin (auto-resume): installed (<prefix>/lib/hpod/ beside
  // <prefix>/bin/hpodd, as `make install` puts it), beside hpodd, or in the build
  // tree (build/src/slurm/spank/ next to build/cmd/hpodd/). Without it clusters
  // run, and `--auto-resume` is an unknown option, as before the plugin existed.
  {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path up = self.parent_path().parent_path();
    for (const fs::path& p :
         {up / "lib" / "hpod" / "spank_hpod.so", self.parent_path() / "spank_hpod.so",
          up.parent_path() / "src" / "slurm" / "spank" / "spank_hpod.so"}) {
      if (!ec && fs::exists(p, ec)) {
        o.spank_plugin = p.string();
        break;
      }
    }
  }
  // hpod-container, which the plugin runs beside itself on the nodes (only with
  // the plugin), and hpod-deep-check, which the agents run for deep health checks.
  if (!o.spank_plugin.empty()) o.container_helper = FindSibling("hpod-container");
  o.deep_check_program = FindSibling("hpod-deep-check");
  // A staged release: its programs replace those found above (node_images.cc
  // names the image from whatever the options point at).
  if (!ctx.node_software.empty()) {
    std::error_code ec;
    for (auto [name, path] :
         {std::pair{"hpod-agent", &o.agent_binary}, std::pair{"spank_hpod.so", &o.spank_plugin},
          std::pair{"hpod-container", &o.container_helper},
          std::pair{"hpod-deep-check", &o.deep_check_program}}) {
      const fs::path staged = fs::absolute(ctx.node_software, ec) / name;
      if (!ec && fs::exists(staged, ec)) *path = staged.string();
    }
  }
  if (!ctx.fake_nvml_library.empty()) {
    // Nodes resolve it in their own mount namespace: pass it absolute.
    o.fake_nvml_library = fs::absolute(ctx.fake_nvml_library).string();
  }
  o.fake_clock_skew_s = ctx.fake_clock_skew_s;
  auto p = hpod::provider::local::LocalProvider::Create(
      o, std::make_unique<hpod::provider::local::RealNodeHost>());
  if (!p.ok()) return p.status();
  return std::unique_ptr<hpod::provider::Provider>(std::move(p).value());
}

}  // namespace

int main(int argc, char** argv) {
  return hpod::cmd::HpoddMain(argc, argv,
                              {{"local", "local (Linux namespaces on this machine)", MakeLocal}});
}
