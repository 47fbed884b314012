// hpod-container: enroot-style images for hpod's Slurm clusters.
//   import URI [-o FILE]   an image → a squashfs file (enroot import's syntax)
//   list                   the node's image cache
//   remove KEY... | --all  drop cached images (not those in use)
//   start --spec JSON      (spank_hpod.so) prepare a step's container and hold it
// Errors are one line on stderr and exit 1.

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"
#include "hpod/container/fetch.h"
#include "hpod/container/image_ref.h"
#include "hpod/container/image_store.h"
#include "hpod/container/mounts.h"
#include "hpod/container/runtime.h"

namespace hpod::container {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

int Fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::fprintf(stderr, "hpod-container: %s\n", line.c_str());
  return 1;
}

bool EnvYes(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::string s = v;
  return s == "1" || s == "y" || s == "yes" || s == "true";
}

FetchOptions Fetching(bool allow_http, bool quiet) {
  FetchOptions o;
  o.allow_http = allow_http || EnvYes("ENROOT_ALLOW_HTTP");
  if (const char* home = std::getenv("HOME")) o.home = home;
  if (!quiet)
    o.progress = [](const std::string& l) { std::fprintf(stderr, "[INFO] %s\n", l.c_str()); };
  return o;
}

// enroot's default output name: registry, image and tag joined by '+'.
std::string DefaultOutput(const ImageRef& ref) {
  std::string name = ref.kind == ImageRef::Kind::kDocker && ref.registry != "docker.io"
                         ? ref.registry + "+" + ref.image
                         : ref.image;
  if (ref.kind == ImageRef::Kind::kDockerArchive || ref.kind == ImageRef::Kind::kOciArchive) {
    name = fs::path(ref.path).stem().string();
  } else if (!ref.tag.empty()) {
    name += "+" + ref.tag;
  }
  for (char& c : name) {
    if (c == '/' || c == ':') c = '+';
  }
  if (name.rfind("library+", 0) == 0) name = name.substr(8);
  return name + ".sqsh";
}

int Import(const std::string& uri, std::string out, bool allow_http) {
  auto ref = ParseImportUri(uri);
  if (!ref.ok()) return Fail(ref.status().message());
  if (ref->kind == ImageRef::Kind::kSquashfs) {
    return Fail(uri + " is already a squashfs file: use it as --container-image=" + uri);
  }
  if (out.empty()) out = DefaultOutput(*ref);
  if (fs::exists(out)) return Fail(out + " already exists; remove it or choose another -o");
  Status s = ImportToSquashfs(*ref, out, Fetching(allow_http, false));
  if (!s.ok()) return Fail(s.message());
  std::fprintf(stderr, "[INFO] image written to %s\n", out.c_str());
  return 0;
}

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", b / double(1ull << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", b / double(1ull << 20));
  }
  return buf;
}

int List(const std::string& cache, const std::string& output) {
  auto store = ImageStore::Open(cache);
  if (!store.ok()) return Fail(store.status().message());
  auto images = store->List();
  if (!images.ok()) return Fail(images.status().message());
  if (output == "json") {
    json a = json::array();
    for (const auto& i : *images) {
      a.push_back({{"Key", i.key},
                   {"Source", i.source},
                   {"Bytes", i.bytes},
                   {"LastUsed", i.last_used},
                   {"InUse", i.in_use}});
    }
    std::printf("%s\n", json{{"CacheDir", cache}, {"Images", a}}.dump(2).c_str());
    return 0;
  }
  std::printf("%-29s %10s  %-19s %-6s %s\n", "KEY", "SIZE", "LAST USED", "IN USE", "SOURCE");
  for (const auto& i : *images) {
    char when[32] = "-";
    std::time_t t = i.last_used;
    if (t > 0) std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    std::printf("%-29s %10s  %-19s %-6s %s\n", i.key.c_str(), HumanBytes(i.bytes).c_str(), when,
                i.in_use ? "yes" : "no", i.source.c_str());
  }
  return 0;
}

int Remove(const std::string& cache, const std::vector<std::string>& keys, bool all) {
  auto store = ImageStore::Open(cache);
  if (!store.ok()) return Fail(store.status().message());
  std::vector<std::string> doomed = keys;
  if (all) {
    auto images = store->List();
    if (!images.ok()) return Fail(images.status().message());
    for (const auto& i : *images) doomed.push_back(i.key);
  }
  if (doomed.empty()) return Fail("remove: name an image KEY (hpod-container list) or --all");
  int rc = 0;
  for (const std::string& k : doomed) {
    Status s = store->Remove(k);
    if (!s.ok())
      rc = Fail(s.message());
    else
      std::printf("removed %s\n", k.c_str());
  }
  return rc;
}

// slurmstepd runs us with its effective uid dropped to the job's user and its real
// uid still root; mounting needs root back (the helper is part of the node's
// trusted software, as slurmstepd is).
Status BecomeRoot() {
  if (::geteuid() == 0) return OkStatus();
  if (::setresuid(0, 0, 0) != 0)
    return ErrnoStatus(errno, "regaining root (hpod-container must run as root)");
  if (::setresgid(0, 0, 0) != 0 || ::setgroups(0, nullptr) != 0) {
    return ErrnoStatus(errno, "regaining root's groups");
  }
  return OkStatus();
}

int StartReply(const json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  return j.contains("error") ? 1 : 0;
}

// The step's container on this node: prepared, entered by a child that then only
// holds the namespace, and torn down when our stdin (slurmstepd's end) closes.
int Start(const std::string& spec_text) {
  // slurmstepd's other descriptors (its sockets to srun and slurmd) are not ours to
  // keep open for the step's life: only stdin (the lifeline), stdout (the answer)
  // and stderr.
  ::closefrom(3);
  json spec = json::parse(spec_text, nullptr, false);
  if (!spec.is_object()) return StartReply({{"error", "hpod-container start: bad --spec"}});
  auto error = [](const Status& s) { return StartReply({{"error", s.message()}}); };
  if (Status s = BecomeRoot(); !s.ok()) return error(s);
  const std::string cache = spec.value("cache_dir", std::string(kDefaultCacheDir));
  auto store = ImageStore::Open(cache, spec.value("cache_max_bytes", uint64_t{0}));
  if (!store.ok()) return error(store.status());
  const std::string job = spec.value("job_id", "0");
  const std::string name = spec.value("name", "");
  const std::string job_dir = cache + "/containers/job-" + job;
  const std::string container_dir = name.empty() ? job_dir + "/step-" + spec.value("step_id", "0") +
                                                       "." + std::to_string(::getpid())
                                                 : job_dir + "/" + name;
  std::string key;
  if (!name.empty()) {
    if (auto text = ReadFile(container_dir + "/container.json"); text.ok()) {
      key = json::parse(*text, nullptr, false).value("image", "");
    }
  }
  if (key.empty()) {
    const std::string image = spec.value("image", "");
    if (image.empty()) {
      return error(InvalidArgumentError("--container-name=" + name +
                                        ": no such container in this job yet; give "
                                        "--container-image too"));
    }
    auto ref = ParseContainerImage(image);
    if (!ref.ok()) return error(ref.status());
    FetchOptions fo;
    fo.allow_http = spec.value("allow_http", false);
    fo.home = spec.value("home", "");
    auto cached = store->Ensure(*ref, fo);
    if (!cached.ok()) return error(cached.status());
    key = cached->key;
  }
  auto cached = store->Get(key);
  if (!cached.ok()) return error(cached.status());
  // Held until we exit: Trim and remove leave the image alone meanwhile.
  int use_fd = ::open(store->UseLockOf(key).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (use_fd < 0 || ::flock(use_fd, LOCK_SH) != 0) {
    return error(ErrnoStatus(errno, "locking " + store->UseLockOf(key)));
  }
  std::error_code ec;
  fs::create_directories(container_dir, ec);
  if (ec) return error(InternalError("creating " + container_dir + ": " + ec.message()));
  if (!name.empty()) {
    Status s = WriteFileAtomic(container_dir + "/container.json",
                               json{{"image", key}, {"source", cached->source}}.dump() + "\n");
    if (!s.ok()) return error(s);
  }
  ContainerSpec cs;
  cs.rootfs = store->RootfsOf(key);
  cs.container_dir = container_dir;
  cs.writable = spec.value("writable", true);
  for (const auto& m : spec.value("mounts", json::array())) {
    cs.mounts.push_back(
        {m.value("source", ""), m.value("destination", ""), m.value("read_only", false)});
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return error(ErrnoStatus(errno, "pipe"));
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return error(ErrnoStatus(errno, "fork"));
  if (child == 0) {
    ::close(report[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    Status s = EnterContainer(cs);
    std::string line = s.ok() ? std::string("ok\n") : s.message() + "\n";
    (void)!::write(report[1], line.data(), line.size());
    ::close(report[1]);
    if (!s.ok()) ::_exit(1);
    while (true) ::pause();  // holds the namespace until the parent kills us
  }
  ::close(report[1]);
  std::string line;
  char buf[512];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof(buf))) > 0;) line.append(buf, n);
  ::close(report[0]);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  auto teardown = [&] {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    if (name.empty()) fs::remove_all(container_dir, ec);
  };
  if (line != "ok") {
    teardown();
    return StartReply({{"error", line.empty() ? "the container's process died" : line}});
  }
  StartReply({{"pid", child},
              {"key", key},
              {"env", cached->config.env},
              {"entrypoint", cached->config.entrypoint},
              {"cmd", cached->config.cmd},
              {"workdir", cached->config.workdir}});
  // slurmstepd holds our stdin's other end until the step ends (or dies).
  while (::read(0, buf, sizeof(buf)) > 0) {
  }
  teardown();
  return 0;
}

}  // namespace
}  // namespace hpod::container

int main(int argc, char** argv) {
  using namespace hpod::container;
  CLI::App app{"hpod-container: enroot-style container images for hpod's Slurm clusters"};
  app.require_subcommand(1);
  std::string cache = kDefaultCacheDir;
  app.add_option("--cache", cache, "the node's image cache")->capture_default_str();

  auto* imp = app.add_subcommand("import", "import an image into a squashfs file (enroot import)");
  std::string uri, out;
  bool allow_http = false;
  imp->add_option("uri", uri,
                  "docker://[USER@][REGISTRY#]IMAGE[:TAG], dockerd://IMAGE[:TAG], "
                  "docker-archive:FILE or oci-archive:FILE")
      ->required();
  imp->add_option("-o,--output", out, "the .sqsh file to write (default: NAME+TAG.sqsh)");
  imp->add_flag("--allow-http", allow_http,
                "the registry speaks plain HTTP (also ENROOT_ALLOW_HTTP=yes)");

  auto* list = app.add_subcommand("list", "the images cached on this node");
  std::string output = "table";
  list->add_option("--output", output, "table or json")
      ->check(CLI::IsMember({"table", "json", "text"}));

  auto* rm = app.add_subcommand("remove", "remove cached images");
  std::vector<std::string> keys;
  bool all = false;
  rm->add_option("key", keys, "KEY as `hpod-container list` shows it");
  rm->add_flag("--all", all, "every image not in use");

  auto* start = app.add_subcommand("start", "(spank_hpod.so) hold a step's container");
  start->group("");
  std::string spec;
  start->add_option("--spec", spec)->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*imp) return Import(uri, out, allow_http);
  if (*list) return List(cache, output);
  if (*rm) return Remove(cache, keys, all);
  if (*start) return Start(spec);
  return 1;
}
