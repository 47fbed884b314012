#include "hpod/controlplane/init.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/controlplane/daemon.h"
#include "hpod/controlplane/metrics.h"

namespace hpod::controlplane {

namespace fs = std::filesystem;

StatusOr<store::AccessKeyRecord> CreateAccessKey(store::Store& store, store::Role role,
                                                 const std::string& description,
                                                 const Clock& clock) {
  store::AccessKeyRecord k;
  k.access_key_id = "HPOD" + RandomString(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
  k.secret_access_key =
      RandomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  k.role = role;
  k.created = clock.NowEpochSeconds();
  k.description = description;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) { return tx.PutAccessKey(k); }));
  return k;
}

Status UpdateIniSection(const std::string& path, const std::string& section,
                        const std::vector<std::pair<std::string, std::string>>& values) {
  std::vector<std::string> lines;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  // Drop the old section body (keys we set and others alike: the section is ours).
  std::vector<std::string> out;
  bool in_section = false;
  for (const auto& line : lines) {
    std::string t = line;
    t.erase(0, t.find_first_not_of(" \t"));
    if (!t.empty() && t[0] == '[') in_section = (t.rfind("[" + section + "]", 0) == 0);
    if (!in_section) out.push_back(line);
  }
  while (!out.empty() && out.back().empty()) out.pop_back();
  if (!out.empty()) out.push_back("");
  out.push_back("[" + section + "]");
  for (const auto& [k, v] : values) out.push_back(k + " = " + v);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string text;
  for (const auto& l : out) text += l + "\n";
  // Credentials: 0600 from the first byte written (the temp file too), durable
  // once this returns.
  return WriteFileAtomic(path, text, 0600);
}

StatusOr<InitResult> InitDataDir(const InitOptions& options, const Clock& clock) {
  if (options.data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) {
    return FailedPreconditionError("cannot create data dir " + options.data_dir + ": " +
                                   ec.message());
  }
  // The store holds secret keys: only the owner may read the data dir.
  fs::permissions(options.data_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  InitResult result;
  std::string path = StorePath(options.data_dir);
  result.created = !fs::exists(path);
  HPOD_ASSIGN_OR_RETURN(auto store, store::OpenSqliteStore({path}));
  ::chmod(path.c_str(), 0600);

  store::AccessKeyRecord admin;
  bool found = false;
  HPOD_RETURN_IF_ERROR(store->Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto keys, tx.ListAccessKeys());
    for (const auto& k : keys) {
      if (k.role == store::Role::kAdmin) {
        admin = k;
        found = true;
        break;
      }
    }
    return OkStatus();
  }));
  if (!found) {
    HPOD_ASSIGN_OR_RETURN(admin,
                          CreateAccessKey(*store, store::Role::kAdmin, "first admin key", clock));
  }
  result.access_key_id = admin.access_key_id;
  HPOD_RETURN_IF_ERROR(EnsureMetricsToken(options.data_dir).status());
  result.metrics_token_file = MetricsTokenPath(options.data_dir);

  if (!options.profile.empty()) {
    std::string aws_dir = options.aws_dir;
    if (aws_dir.empty()) {
      const char* home = std::getenv("HOME");
      aws_dir = std::string(home ? home : "/root") + "/.aws";
    }
    result.credentials_file = aws_dir + "/credentials";
    result.config_file = aws_dir + "/config";
    HPOD_RETURN_IF_ERROR(UpdateIniSection(result.credentials_file, options.profile,
                                          {{"aws_access_key_id", admin.access_key_id},
                                           {"aws_secret_access_key", admin.secret_access_key}}));
    HPOD_RETURN_IF_ERROR(UpdateIniSection(
        result.config_file, "profile " + options.profile,
        {{"region", options.region}, {"endpoint_url", options.endpoint_url}, {"output", "json"}}));
  }
  return result;
}

}  // namespace hpod::controlplane
