#pragma once

// What websocket.cc and websocket_swarm.cc share; private to the http library
// (it includes Boost.Beast, which the rest of the tree never does).

#include <boost/beast/websocket/rfc6455.hpp>
#include <string>

#include "hpod/base/status.h"

namespace hpod::http::internal {

// The http(s):// form of a ws(s):// URL.
std::string HttpUrl(const std::string& url);

// A refused upgrade (a response that is not 101) as the status a caller acts on
// (WebSocketClient::Connect lists them): 401 kUnauthenticated, 404 kNotFound, ...
Status RefusalStatus(const boost::beast::websocket::response_type& response,
                     const std::string& url);

}  // namespace hpod::http::internal
