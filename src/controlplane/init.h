#pragma once

// `hpodd init` and key management: creates the data dir and the store, mints the
// first admin access key, and writes it to an AWS-style credentials/config profile
// so `aws --profile hpod` and `hpod` work at once; creates GET /metrics's token
// (<data_dir>/metrics-token). Idempotent: a second init reuses the existing store,
// first admin key and token.
//
// Thread contract: free functions; run before the daemon starts (they open the
// store themselves).

#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct InitOptions {
  std::string data_dir;
  std::string region = "us-west-2";
  // Written as the profile's endpoint_url (botocore and hpod read it).
  std::string endpoint_url = "http://127.0.0.1:8450";
  std::string profile = "hpod";
  // Where credentials/config go; empty = $HOME/.aws. Empty profile name = skip.
  std::string aws_dir;
};

struct InitResult {
  std::string access_key_id;
  bool created = false;  // false when the data dir was already initialized
  std::string credentials_file;
  std::string config_file;
  // GET /metrics's bearer token (metrics.h), created if missing.
  std::string metrics_token_file;
};

StatusOr<InitResult> InitDataDir(const InitOptions& options, const Clock& clock);

// Mints a key ("HPOD" + 16 [A-Z0-9], 40-character secret) and stores it.
StatusOr<store::AccessKeyRecord> CreateAccessKey(store::Store& store, store::Role role,
                                                 const std::string& description,
                                                 const Clock& clock);

// Sets `section` keys in an INI file, keeping every other section and line,
// creating the file (mode 0600) if needed.
Status UpdateIniSection(const std::string& path, const std::string& section,
                        const std::vector<std::pair<std::string, std::string>>& values);

}  // namespace hpod::controlplane
