// LocalProvider's image store (local_provider.h, CurrentImage): the programs it
// puts on nodes, kept per image so that a node runs the software it was launched
// with — across reboots, and after the build or package beside hpodd changed —
// and so that UpdateClusterSoftware can move nodes to a new image and back.
//
// <state_dir>/images/<id>/{hpod-agent,spank_hpod.so,hpod-container,hpod-deep-check}:
// copies, named by api::ImageIdOf over the copies' own digests (a program
// rewritten while it was copied can never give an id that lies about its bytes).

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "hpod/api/software_image.h"
#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/provider/local/local_provider.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;

namespace {

// The option holding program `name`'s path.
const std::string* ProgramOption(const LocalProviderOptions& o, const std::string& name) {
  if (name == "hpod-agent") return &o.agent_binary;
  if (name == "spank_hpod.so") return &o.spank_plugin;
  if (name == "hpod-container") return &o.container_helper;
  if (name == "hpod-deep-check") return &o.deep_check_program;
  return nullptr;
}

bool ImageIdShaped(const std::string& id) {
  return id.size() > 4 && id.rfind("ami-", 0) == 0 &&
         id.find_first_not_of("0123456789abcdef", 4) == std::string::npos;
}

}  // namespace

std::string LocalProvider::ImageDir(const std::string& id) const {
  return options_.state_dir + "/images/" + id;
}

std::string LocalProvider::NodeProgram(const Node& n, const std::string& name) const {
  const std::string* option = ProgramOption(options_, name);
  if (option == nullptr || option->empty()) return "";
  if (n.image_id.empty()) return *option;
  // An image made while hpodd had no such program has none to give.
  const std::string path = ImageDir(n.image_id) + "/" + name;
  std::error_code ec;
  return fs::exists(path, ec) ? path : "";
}

StatusOr<std::string> LocalProvider::CurrentImage() const {
  std::error_code ec;
  if (options_.agent_binary.empty() || !fs::is_regular_file(options_.agent_binary, ec)) {
    return std::string();
  }
  // The programs as they are now: a changed size, time or inode is new software.
  std::string key;
  std::vector<std::pair<std::string, std::string>> programs;  // name, path
  for (const std::string& name : api::SoftwareNames()) {
    const std::string* path = ProgramOption(options_, name);
    if (path == nullptr || path->empty()) continue;
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) {
      return InternalError("local provider: " + name + " " + *path + " is gone");
    }
    key += name + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino) + ";";
    programs.emplace_back(name, *path);
  }
  {
    MutexLock lock(current_mu_);
    if (key == image_key_ && !image_id_.empty() && fs::is_directory(ImageDir(image_id_), ec)) {
      return image_id_;
    }
  }
  // One copy at a time; the store's other users (launches, CollectImages) take
  // only current_mu_, briefly, and never wait for a copy.
  MutexLock lock(images_mu_);
  const std::string staging = options_.state_dir + "/images/.staging";
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return InternalError("local provider: creating " + staging + ": " + ec.message());
  api::SoftwareDigests digests;
  for (const auto& [name, path] : programs) {
    const std::string copy = staging + "/" + name;
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing, ec);
    if (ec) return InternalError("local provider: copying " + path + ": " + ec.message());
    HPOD_ASSIGN_OR_RETURN(digests[name], Sha256FileHex(copy));
  }
  const std::string id = api::ImageIdOf(digests);
  if (fs::is_directory(ImageDir(id), ec)) {
    fs::remove_all(staging, ec);
    // Current again: as new as a new image, for CollectImages.
    fs::last_write_time(ImageDir(id), fs::file_time_type::clock::now(), ec);
  } else {
    fs::rename(staging, ImageDir(id), ec);
    if (ec) return InternalError("local provider: storing image " + id + ": " + ec.message());
    spdlog::info("local provider: software image {} stored in {}", id, ImageDir(id));
  }
  MutexLock current(current_mu_);
  image_key_ = key;
  image_id_ = id;
  return id;
}

bool LocalProvider::HasImage(const std::string& image_id) const {
  std::error_code ec;
  return ImageIdShaped(image_id) && fs::is_regular_file(ImageDir(image_id) + "/hpod-agent", ec);
}

Status LocalProvider::SetNodeImage(const std::string& instance_id, const std::string& image_id) {
  if (!HasImage(image_id)) {
    return InvalidArgumentError("software image " + image_id + " is not in the image store (" +
                                ImageDir(image_id) + ")");
  }
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("local provider: no node " + instance_id);
  Node& n = it->second;
  if (n.image_id == image_id) return OkStatus();
  const std::string previous = n.image_id;
  n.image_id = image_id;
  if (options_.node_program.empty()) {
    // PID 1's config names the agent; the rest of it stays as the launch wrote it.
    const std::string path = NodeDir(instance_id) + "/node-init.json";
    auto text = ReadFile(path);
    auto config = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
    if (!config.is_object() || !config["program"].is_array() || config["program"].empty()) {
      n.image_id = previous;
      return InternalError("local provider: " + path + " is unreadable");
    }
    config["program"][0] = NodeProgram(n, "hpod-agent");
    if (Status s = WriteFileAtomic(path, config.dump(2), 0644); !s.ok()) {
      n.image_id = previous;
      return s;
    }
  }
  // Newer than the disk's copies, so the next start copies the image's (PrepareDisk).
  std::error_code ec;
  for (const std::string& name : api::SoftwareNames()) {
    const std::string program = NodeProgram(n, name);
    if (!program.empty()) fs::last_write_time(program, fs::file_time_type::clock::now(), ec);
  }
  return SaveNode(n);
}

void LocalProvider::CollectImages() {
  std::set<std::string> used;
  for (const auto& [id, n] : nodes_) used.insert(n.image_id);
  {
    MutexLock lock(current_mu_);
    used.insert(image_id_);
  }
  // The control plane may still launch an image no node runs (a group's, a
  // rollback's), and the provider does not know its groups: only images older
  // than kImageRetention go, and never the newest kKeptImages.
  const auto old = fs::file_time_type::clock::now() - kImageRetention;
  std::vector<std::pair<fs::file_time_type, fs::path>> others;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.state_dir + "/images", ec)) {
    const std::string name = e.path().filename().string();
    if (!ImageIdShaped(name) || used.count(name)) continue;
    std::error_code time_ec;
    others.emplace_back(fs::last_write_time(e.path(), time_ec), e.path());
  }
  if (static_cast<int>(others.size()) <= kKeptImages) return;
  std::sort(others.begin(), others.end(), [](const auto& a, const auto& b) {
    return a.first > b.first;  // newest first
  });
  for (size_t i = kKeptImages; i < others.size(); ++i) {
    if (others[i].first > old) continue;
    fs::remove_all(others[i].second, ec);
    if (ec)
      spdlog::warn("local provider: removing {}: {}", others[i].second.string(), ec.message());
  }
}

}  // namespace hpod::provider::local
