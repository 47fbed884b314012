#pragma once

// What websocket.cc and websocket_swarm.cc share; private to the http library
// (it includes Boost.Beast, which the rest of the tree never does).

#include <openssl/types.h>

#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/system/error_code.hpp>
#include <string>

#include "hpod/base/status.h"

namespace hpod::http::internal {

// The http(s):// form of a ws(s):// URL.
std::string HttpUrl(const std::string& url);

// A failed WebSocket handshake (`ec` set) as the status a caller acts on
// (WebSocketClient::Connect lists them): a refused upgrade (a response that is
// not 101: 401 kUnauthenticated, 404 kNotFound, ...); a TLS alert after the
// client's side of the TLS handshake was done ("TLS connection with `peer`
// failed: …"; `ssl` is the connection's, or null without TLS); anything else
// kUnavailable naming `url`.
Status HandshakeFailure(const boost::system::error_code& ec,
                        const boost::beast::websocket::response_type& response,
                        const std::string& url, const std::string& peer, SSL* ssl);

}  // namespace hpod::http::internal
