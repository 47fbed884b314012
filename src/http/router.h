#pragma once

// Routes requests to handlers by method and path, and WebSocket upgrades by path,
// for http::Server: a daemon builds one Router per listener, then passes
// router.handler() and router.upgrade_handler() to Server::Start.
//
// A path matches a route exactly ("/healthz") or by prefix ("/static/", which must
// end in '/': it then serves "/static/a/b" but not "/static" or "/staticfoo"). The
// path is the raw request-target before '?', compared byte for byte (no decoding,
// no dot-segment removal: a prefix route that maps paths to files must check them
// itself). An exact route beats a prefix route; a longer prefix beats a shorter one.
// HEAD is served by the path's GET route unless the path has a HEAD route of its own
// (the server then sends no body).
//
// Every route declares who may call it (AuthRule). The router checks nothing: the
// route's handler does, and the rule is the route table's statement of which check
// that is (ApiServer verifies SigV4 itself because it needs the caller's role; the
// agent service verifies node and session tokens). Routes are listed with their rule
// by routes(), so the access policy of a listener can be read and logged in one
// place.
//
// A request no route serves goes to the miss handler (default: 404 for an unknown
// path, 405 for a known path with another method, both with a JSON body
// {"__type": "...", "message": "..."} as the AWS JSON protocol writes errors); on a
// 405-kind miss the router adds an `Allow` header naming the path's methods,
// whoever built the response. An upgrade request no upgrade route serves gets a 404
// (it never reaches a plain route or the miss handler).
//
// Thread contract: configure (Add*, SetMissHandler) from one thread before the
// router serves; Serve, ServeUpgrade, Match and routes() are const and safe for
// concurrent calls once configuration is done. handler() and upgrade_handler()
// borrow the router: it must outlive every server that holds them.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/http/message.h"
#include "hpod/http/server.h"
#include "hpod/http/websocket.h"

namespace hpod::http {

// Who may call a route (see the file comment: the handler enforces it).
enum class AuthRule {
  kNone,          // anyone who can reach the listener (e.g. GET /healthz)
  kSigV4,         // an AWS SigV4 signature by one of the store's access keys
  kAgentToken,    // a node agent's bootstrap token or credential
  kSessionToken,  // the one-time token of a session granted by the API (StartSession)
  kBearerToken,   // `Authorization: Bearer <token>`, a static secret (GET /metrics)
};
// "none", "sigv4", "agent-token", "session-token", "bearer-token".
std::string_view AuthRuleName(AuthRule rule);

enum class PathMatch { kExact, kPrefix };

// One entry of the route table, without its handler.
struct Route {
  std::string method;  // "GET", "POST", ...; empty for an upgrade route
  std::string path;    // "/healthz"; for kPrefix the prefix, ending in '/'
  PathMatch match = PathMatch::kExact;
  AuthRule auth = AuthRule::kNone;
  bool upgrade = false;  // a WebSocket upgrade route

  // "GET /healthz (none)", "GET /static/* (none)", "WS /v1/sessions/* (session-token)".
  std::string ToString() const;
};

// Why no route serves a request.
struct RouteMiss {
  enum class Kind {
    kNotFound,          // no route for the path
    kMethodNotAllowed,  // routes for the path, none for the method
  };
  Kind kind = Kind::kNotFound;
  // kMethodNotAllowed: the methods the path serves, in registration order (HEAD
  // included where GET is). Empty for kNotFound.
  std::vector<std::string> allowed;
};
using MissHandler = std::function<Response(const Request& request, const RouteMiss& miss)>;

// The router's own answer to a miss: 404 NotFoundException or 405
// MethodNotAllowedException with a JSON body naming the method and path (Allow is
// added by the router, not here). For miss handlers that answer some misses
// themselves and leave the rest to the default.
Response DefaultMissResponse(const Request& request, const RouteMiss& miss);

class Router {
 public:
  Router();
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Registers `handler` for `method` on exactly `path` (AddPrefix: on every path
  // under `prefix`). Fails with kInvalidArgument when the method is empty or holds
  // anything but letters, the path does not start with '/' (a prefix also when it
  // does not end with '/'), or the handler is empty; kAlreadyExists when the same
  // method and pattern are taken.
  Status Add(std::string method, std::string path, AuthRule auth, Handler handler);
  Status AddPrefix(std::string method, std::string prefix, AuthRule auth, Handler handler);
  // Registers a WebSocket upgrade route (any upgrade request is a GET). Same errors.
  Status AddUpgrade(std::string path, AuthRule auth, UpgradeHandler handler);
  Status AddUpgradePrefix(std::string prefix, AuthRule auth, UpgradeHandler handler);

  // Replaces the default miss handler (DefaultMissResponse). Null restores it.
  void SetMissHandler(MissHandler handler);

  // Runs the route's handler, or the miss handler. What a handler throws propagates
  // (the server turns it into a 500).
  Response Serve(const Request& request) const;
  // Runs the upgrade route's handler; 404 when no upgrade route serves the path.
  UpgradeResult ServeUpgrade(const Request& request, std::shared_ptr<WebSocket> socket) const;

  // The route that would serve a plain request (or, with upgrade, an upgrade
  // request) for `method` and `path`, or null. For tests and logs.
  const Route* Match(std::string_view method, std::string_view path, bool upgrade = false) const;
  // Every route, in registration order.
  std::vector<Route> routes() const;

  // Serve / ServeUpgrade bound to this router, for Server::Start.
  Handler handler() const;
  UpgradeHandler upgrade_handler() const;

 private:
  struct Entry;
  Status AddEntry(Route route, Handler handler, UpgradeHandler upgrade_handler);
  // The entry serving the request, or null with `*miss` filled in.
  const Entry* Find(std::string_view method, std::string_view path, bool upgrade,
                    RouteMiss* miss) const;

  std::vector<std::unique_ptr<Entry>> entries_;  // registration order
  MissHandler miss_handler_;
};

}  // namespace hpod::http
