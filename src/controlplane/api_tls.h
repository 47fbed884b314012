#pragma once

// TLS on hpodd's API listener (the API, the console, the session relay and
// /metrics share it). Every listener on an address other than loopback serves TLS
// only: the access keys' signatures would survive plain HTTP, but session tokens,
// the metrics bearer token, shells' keystrokes and clusters' contents would not.
// Loopback stays plain HTTP unless asked (`hpodd --tls`), so the quickstart and
// scripts on hpodd's own machine need no CA. The certificate is the one
// `hpodd init` made in <data_dir>/tls (init.h).
//
// Thread contract: pure functions (they read files).

#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/http/server.h"

namespace hpod::controlplane {

// Whether `address` (an IP literal, or "localhost") is a loopback address:
// 127.0.0.0/8, ::1 or localhost. Anything else (0.0.0.0, ::, a real interface's
// address) reaches other machines.
bool IsLoopbackAddress(const std::string& address);

// The API listener's TLS settings for `address`: disabled on loopback unless
// `force`; otherwise enabled with <data_dir>/tls/server.pem and server.key, after
// checking what a client would check, so that hpodd refuses to start rather than
// serve a certificate every client refuses. kFailedPrecondition, saying which
// command fixes it, when the files are missing, unreadable, do not verify against
// <data_dir>/tls/ca.pem (or have expired), or the certificate does not name
// `address` (a wildcard address is named by none and not checked).
StatusOr<http::TlsServerOptions> ApiTlsOptions(const std::string& data_dir,
                                               const std::string& address, bool force,
                                               const Clock& clock);

}  // namespace hpod::controlplane
