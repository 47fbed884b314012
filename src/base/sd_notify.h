#pragma once

// systemd's readiness protocol without libsystemd: one datagram to the AF_UNIX
// socket named by $NOTIFY_SOCKET ('@' prefix = abstract namespace). A no-op when
// the variable is unset (not started by systemd).
//
// Thread contract: stateless; thread-safe.

#include <string_view>

#include "hpod/base/status.h"

namespace hpod {

// E.g. SdNotify("READY=1"), SdNotify("STOPPING=1"), SdNotify("STATUS=...").
Status SdNotify(std::string_view state);

}  // namespace hpod
