#pragma once

// Registry credentials as enroot users keep them: `~/.config/enroot/.credentials`
// in netrc form, one `machine HOST login USER password PASS` per registry
// (ENROOT_CONFIG_PATH moves the directory). enroot evaluates a password written
// as `$(command)`; hpod does not run commands from that file and says so.
// Docker's `~/.docker/config.json` is read by skopeo itself (--authfile).
//
// Thread contract: plain values and pure functions.

#include <optional>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::container {

struct Credential {
  std::string login;
  std::string password;
};

// The entry for `host` (a `default` entry matches any host). kInvalidArgument for a
// `$(...)` password, naming the host.
StatusOr<std::optional<Credential>> FindCredential(std::string_view netrc, std::string_view host);

}  // namespace hpod::container
