#include "hpod/agent/fs_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/base/file_util.h"

namespace hpod::agent {

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return InternalError("creating " + target.parent_path().string() + ": " + ec.message());
  return hpod::WriteFileAtomic(path, data, mode);
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFoundError(path + " does not exist");
    return InternalError("reading " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ReadBootId(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  std::string id = *text;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace hpod::agent
