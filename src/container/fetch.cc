#include "hpod/container/fetch.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"
#include "hpod/container/credentials.h"

namespace hpod::container {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr auto kFetchTimeout = std::chrono::minutes(30);

// The last non-empty line of a tool's output: what it says went wrong. For
// skopeo's logrus lines (time="..." level=fatal msg="..."), the message only.
std::string LastLine(const SubprocessResult& r) {
  for (const std::string* s : {&r.stderr_data, &r.stdout_data}) {
    std::istringstream in(*s);
    std::string line, last;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    }
    if (size_t msg = last.find(" msg=\""); msg != std::string::npos && last.back() == '"') {
      last = last.substr(msg + 6, last.size() - msg - 7);
    }
    if (!last.empty()) return last;
  }
  return r.timed_out ? "timed out" : "exit code " + std::to_string(r.exit_code);
}

StatusOr<SubprocessResult> Run(std::vector<std::string> argv, const std::string& tool_package) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.timeout = kFetchTimeout;
  auto r = RunCommand(o);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    return FailedPreconditionError(o.argv[0] + " is not installed on this node (apt-get install " +
                                   tool_package + ")");
  }
  return r;
}

// skopeo's flags for the source: TLS, and credentials from enroot's file (Docker's
// config.json skopeo finds itself through --authfile).
StatusOr<std::vector<std::string>> SourceFlags(const ImageRef& ref, const FetchOptions& options,
                                               const std::string& prefix) {
  std::vector<std::string> flags;
  if (ref.kind != ImageRef::Kind::kDocker) return flags;
  if (options.allow_http) flags.push_back("--" + prefix + "tls-verify=false");
  if (options.home.empty()) return flags;
  const std::string docker_cfg = options.home + "/.docker/config.json";
  const char* cfg_env = std::getenv("ENROOT_CONFIG_PATH");
  const std::string netrc =
      (cfg_env && *cfg_env ? std::string(cfg_env) : options.home + "/.config/enroot") +
      "/.credentials";
  if (auto text = ReadFile(netrc); text.ok()) {
    auto cred =
        FindCredential(*text, ref.registry == "docker.io" ? "auth.docker.io" : ref.registry);
    if (!cred.ok()) return cred.status();
    if (*cred && (ref.user.empty() || ref.user == (*cred)->login)) {
      flags.push_back("--" + prefix + "creds=" + (*cred)->login + ":" + (*cred)->password);
      return flags;
    }
  }
  if (fs::exists(docker_cfg)) flags.push_back("--authfile=" + docker_cfg);
  return flags;
}

std::vector<std::string> StringArray(const json& j) {
  std::vector<std::string> out;
  if (j.is_array()) {
    for (const auto& v : j) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
  }
  return out;
}

// The image config of the one image in an OCI layout (index → manifest → config).
StatusOr<ImageConfig> LayoutConfig(const std::string& layout) {
  auto blob = [&](const json& descriptor) -> StatusOr<json> {
    std::string digest = descriptor.value("digest", "");
    if (digest.rfind("sha256:", 0) != 0) return InternalError("bad digest in " + layout);
    auto text = ReadFile(layout + "/blobs/sha256/" + digest.substr(7));
    if (!text.ok()) return text.status();
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return InternalError("unreadable blob " + digest + " in " + layout);
    return j;
  };
  auto index_text = ReadFile(layout + "/index.json");
  if (!index_text.ok()) return index_text.status();
  json index = json::parse(*index_text, nullptr, false);
  if (index.is_discarded() || !index.contains("manifests") || index["manifests"].empty()) {
    return InternalError("no image in " + layout + "/index.json");
  }
  auto manifest = blob(index["manifests"][0]);
  if (!manifest.ok()) return manifest.status();
  auto config = blob(manifest->value("config", json::object()));
  if (!config.ok()) return config.status();
  const json c = config->value("config", json::object());
  ImageConfig out;
  out.env = StringArray(c.value("Env", json::array()));
  out.entrypoint = StringArray(c.value("Entrypoint", json::array()));
  out.cmd = StringArray(c.value("Cmd", json::array()));
  out.workdir = c.value("WorkingDir", "");
  return out;
}

}  // namespace

Status FetchRootfs(const ImageRef& ref, const std::string& work, const FetchOptions& options,
                   ImageConfig* config) {
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const std::string rootfs = work + "/rootfs";
  if (ref.kind == ImageRef::Kind::kSquashfs) {
    say("unpacking " + ref.path);
    auto r =
        Run({"unsquashfs", "-no-progress", "-quiet", "-d", rootfs, ref.path}, "squashfs-tools");
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      return InvalidArgumentError("image " + ref.path + " is not a readable squashfs file (" +
                                  LastLine(*r) + "); import it again with hpod-container import");
    }
    *config = ReadRootfsConfig(rootfs);
    return OkStatus();
  }
  const std::string layout = work + "/oci";
  auto flags = SourceFlags(ref, options, "src-");
  if (!flags.ok()) return flags.status();
  std::vector<std::string> copy = {"skopeo", "copy", "--quiet"};
  copy.insert(copy.end(), flags->begin(), flags->end());
  copy.push_back(ref.SkopeoSource());
  copy.push_back("oci:" + layout + ":image");
  say("pulling " + ref.ToString());
  auto r = Run(copy, "skopeo");
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return UnavailableError("could not pull " + ref.ToString() + ": " + LastLine(*r));
  }
  auto cfg = LayoutConfig(layout);
  if (!cfg.ok()) return cfg.status();
  *config = *cfg;
  say("unpacking layers");
  const std::string bundle = work + "/bundle";
  r = Run({"umoci", "unpack", "--image", layout + ":image", bundle}, "umoci");
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return InternalError("could not unpack " + ref.ToString() + ": " + LastLine(*r));
  }
  std::error_code ec;
  fs::rename(bundle + "/rootfs", rootfs, ec);
  if (ec) return InternalError("moving " + bundle + "/rootfs: " + ec.message());
  fs::remove_all(bundle, ec);
  fs::remove_all(layout, ec);
  return WriteRootfsConfig(rootfs, *config);
}

StatusOr<RemoteImage> InspectRemote(const ImageRef& ref, const FetchOptions& options) {
  auto flags = SourceFlags(ref, options, "");
  if (!flags.ok()) return flags.status();
  // The raw manifest: its SHA-256 is the image's digest (for a multi-platform
  // index, the index's: a key that changes when the tag moves all the same), and
  // a single-platform manifest lists its layers' sizes. skopeo 1.9 (Debian 12)
  // has no LayersData in `inspect --format`.
  std::vector<std::string> argv = {"skopeo", "inspect", "--raw"};
  argv.insert(argv.end(), flags->begin(), flags->end());
  argv.push_back(ref.SkopeoSource());
  auto r = Run(argv, "skopeo");
  if (!r.ok()) return r.status();
  json manifest = json::parse(r->stdout_data, nullptr, false);
  if (r->exit_code != 0 || !manifest.is_object()) {
    return UnavailableError("could not find " + ref.ToString() + ": " + LastLine(*r));
  }
  RemoteImage image;
  image.digest = HexEncode(Sha256(r->stdout_data));
  for (const auto& layer : manifest.value("layers", json::array())) {
    if (layer.is_object()) image.layer_bytes += layer.value("size", uint64_t{0});
  }
  return image;
}

Status WriteRootfsConfig(const std::string& rootfs, const ImageConfig& config) {
  std::error_code ec;
  fs::create_directories(rootfs + "/etc/hpod-container", ec);
  if (ec) return InternalError("creating " + rootfs + "/etc/hpod-container: " + ec.message());
  json j = {{"Env", config.env},
            {"Entrypoint", config.entrypoint},
            {"Cmd", config.cmd},
            {"WorkingDir", config.workdir}};
  HPOD_RETURN_IF_ERROR(
      WriteFileAtomic(rootfs + "/etc/hpod-container/image.json", j.dump(2) + "\n"));
  std::string env;
  for (const std::string& e : config.env) env += e + "\n";
  // /etc/environment may be a dangling absolute symlink into the host; replace it.
  fs::remove(rootfs + "/etc/environment", ec);
  return WriteFileAtomic(rootfs + "/etc/environment", env);
}

ImageConfig ReadRootfsConfig(const std::string& rootfs) {
  ImageConfig c;
  if (auto text = ReadFile(rootfs + "/etc/hpod-container/image.json"); text.ok()) {
    json j = json::parse(*text, nullptr, false);
    if (j.is_object()) {
      c.env = StringArray(j.value("Env", json::array()));
      c.entrypoint = StringArray(j.value("Entrypoint", json::array()));
      c.cmd = StringArray(j.value("Cmd", json::array()));
      c.workdir = j.value("WorkingDir", "");
      return c;
    }
  }
  // An image enroot made: its env is in /etc/environment, KEY=VALUE lines.
  std::ifstream in(rootfs + "/etc/environment");
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0 && line[0] != '#') c.env.push_back(line);
  }
  return c;
}

Status ImportToSquashfs(const ImageRef& ref, const std::string& out, const FetchOptions& options) {
  // Beside the output, so the unpacked tree lands on the same disk (the user's
  // /fsx, not the node's root) and the final rename is atomic.
  const std::string work = out + ".import." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) return FailedPreconditionError("cannot create " + work + ": " + ec.message());
  ImageConfig config;
  Status s = FetchRootfs(ref, work, options, &config);
  if (s.ok()) {
    if (options.progress) options.progress("creating squashfs " + out);
    auto r = Run({"mksquashfs", work + "/rootfs", work + "/image.sqsh", "-noappend", "-comp",
                  "zstd", "-no-progress", "-quiet"},
                 "squashfs-tools");
    if (!r.ok()) {
      s = r.status();
    } else if (r->exit_code != 0) {
      s = InternalError("mksquashfs " + out + ": " + LastLine(*r));
    } else {
      fs::rename(work + "/image.sqsh", out, ec);
      if (ec) s = InternalError("writing " + out + ": " + ec.message());
    }
  }
  fs::remove_all(work, ec);
  return s;
}

uint64_t DiskUsage(const std::string& path) {
  uint64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace hpod::container
