#include "hpod/agent/slurm_layout.h"

#include <unistd.h>

#include <filesystem>

namespace hpod::agent {

namespace fs = std::filesystem;

Status LinkSlurmLayout(const std::string& prefix, const std::vector<std::string>& search_dirs) {
  for (const auto& [sub, programs] :
       {std::pair{"bin", &kSlurmCommands}, std::pair{"sbin", &kSlurmDaemons}}) {
    const fs::path dir = fs::path(prefix) / sub;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return InternalError("creating " + dir.string() + ": " + ec.message());
    for (const std::string& p : *programs) {
      const fs::path link = dir / p;
      if (fs::symlink_status(link, ec).type() != fs::file_type::not_found) continue;
      for (const std::string& d : search_dirs) {
        const fs::path target = fs::path(d) / p;
        if (::access(target.c_str(), X_OK) != 0) continue;
        fs::create_symlink(target, link, ec);
        if (ec) return InternalError("linking " + link.string() + ": " + ec.message());
        break;
      }
    }
  }
  return OkStatus();
}

}  // namespace hpod::agent
