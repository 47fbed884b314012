#include "hpod/http/router.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace hpod::http {
namespace {

bool IsMethodToken(std::string_view method) {
  return !method.empty() &&
         std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

bool PatternMatches(const Route& route, std::string_view path) {
  if (route.match == PathMatch::kExact) return path == route.path;
  return path.size() > route.path.size() && path.substr(0, route.path.size()) == route.path;
}

// Higher is more specific: an exact route beats every prefix, a longer prefix a
// shorter one.
size_t Specificity(const Route& route) {
  return route.match == PathMatch::kExact ? std::string::npos : route.path.size();
}

Response JsonError(int status, const std::string& type, const std::string& message) {
  Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "application/json"});
  // botocore reads the error code from this header when the body lacks one.
  r.headers.push_back({"x-amzn-ErrorType", type});
  nlohmann::ordered_json body;
  body["__type"] = type;
  body["message"] = message;
  // The path is the client's; bytes that are not UTF-8 are replaced, not fatal.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace

std::string_view AuthRuleName(AuthRule rule) {
  switch (rule) {
    case AuthRule::kNone:
      return "none";
    case AuthRule::kSigV4:
      return "sigv4";
    case AuthRule::kAgentToken:
      return "agent-token";
    case AuthRule::kSessionToken:
      return "session-token";
    case AuthRule::kBearerToken:
      return "bearer-token";
  }
  return "unknown";
}

std::string Route::ToString() const {
  std::string s = upgrade ? "WS" : method;
  s += ' ';
  s += path;
  if (match == PathMatch::kPrefix) s += '*';
  s += " (";
  s += AuthRuleName(auth);
  s += ')';
  return s;
}

Response DefaultMissResponse(const Request& request, const RouteMiss& miss) {
  std::string path(request.Path());
  std::string got = " (got " + request.method + " " + path + ")";
  if (miss.kind == RouteMiss::Kind::kMethodNotAllowed) {
    return JsonError(405, "MethodNotAllowedException",
                     "hpod serves " + path + " as " + Join(miss.allowed, ", ") + got);
  }
  return JsonError(404, "NotFoundException", "hpod serves nothing at " + path + got);
}

struct Router::Entry {
  Route route;
  Handler handler;                 // plain routes
  UpgradeHandler upgrade_handler;  // upgrade routes
};

Router::Router() = default;
Router::~Router() = default;

Status Router::Add(std::string method, std::string path, AuthRule auth, Handler handler) {
  return AddEntry(Route{std::move(method), std::move(path), PathMatch::kExact, auth, false},
                  std::move(handler), nullptr);
}

Status Router::AddPrefix(std::string method, std::string prefix, AuthRule auth, Handler handler) {
  return AddEntry(Route{std::move(method), std::move(prefix), PathMatch::kPrefix, auth, false},
                  std::move(handler), nullptr);
}

Status Router::AddUpgrade(std::string path, AuthRule auth, UpgradeHandler handler) {
  return AddEntry(Route{"", std::move(path), PathMatch::kExact, auth, true}, nullptr,
                  std::move(handler));
}

Status Router::AddUpgradePrefix(std::string prefix, AuthRule auth, UpgradeHandler handler) {
  return AddEntry(Route{"", std::move(prefix), PathMatch::kPrefix, auth, true}, nullptr,
                  std::move(handler));
}

Status Router::AddEntry(Route route, Handler handler, UpgradeHandler upgrade_handler) {
  if (!route.upgrade && !IsMethodToken(route.method)) {
    return InvalidArgumentError("route method must be upper-case letters, got '" + route.method +
                                "'");
  }
  if (route.path.empty() || route.path[0] != '/') {
    return InvalidArgumentError("route path must start with '/', got '" + route.path + "'");
  }
  if (route.match == PathMatch::kPrefix && route.path.back() != '/') {
    return InvalidArgumentError("route prefix must end with '/', got '" + route.path + "'");
  }
  if (route.upgrade ? !upgrade_handler : !handler) {
    return InvalidArgumentError("route " + route.ToString() + " has no handler");
  }
  for (const auto& e : entries_) {
    const Route& r = e->route;
    if (r.upgrade == route.upgrade && r.method == route.method && r.path == route.path &&
        r.match == route.match) {
      return AlreadyExistsError("route " + route.ToString() + " is already registered as " +
                                r.ToString());
    }
  }
  auto entry = std::make_unique<Entry>();
  entry->route = std::move(route);
  entry->handler = std::move(handler);
  entry->upgrade_handler = std::move(upgrade_handler);
  entries_.push_back(std::move(entry));
  return OkStatus();
}

void Router::SetMissHandler(MissHandler handler) { miss_handler_ = std::move(handler); }

const Router::Entry* Router::Find(std::string_view method, std::string_view path, bool upgrade,
                                  RouteMiss* miss) const {
  // Few routes (a handful per listener): a scan is cheaper than any index here.
  const Entry* best = nullptr;
  const Entry* best_get = nullptr;  // HEAD falls back to GET
  std::vector<std::string> allowed;
  for (const auto& e : entries_) {
    const Route& r = e->route;
    if (r.upgrade != upgrade || !PatternMatches(r, path)) continue;
    if (upgrade || r.method == method) {
      if (best == nullptr || Specificity(r) > Specificity(best->route)) best = e.get();
    } else if (method == "HEAD" && r.method == "GET") {
      if (best_get == nullptr || Specificity(r) > Specificity(best_get->route)) best_get = e.get();
    }
    if (!upgrade && std::find(allowed.begin(), allowed.end(), r.method) == allowed.end()) {
      allowed.push_back(r.method);
    }
  }
  if (best != nullptr) return best;
  if (best_get != nullptr) return best_get;
  if (std::find(allowed.begin(), allowed.end(), "GET") != allowed.end() &&
      std::find(allowed.begin(), allowed.end(), "HEAD") == allowed.end()) {
    allowed.push_back("HEAD");
  }
  miss->kind = allowed.empty() ? RouteMiss::Kind::kNotFound : RouteMiss::Kind::kMethodNotAllowed;
  miss->allowed = std::move(allowed);
  return nullptr;
}

Response Router::Serve(const Request& request) const {
  RouteMiss miss;
  if (const Entry* e = Find(request.method, request.Path(), false, &miss)) {
    return e->handler(request);
  }
  Response response =
      miss_handler_ ? miss_handler_(request, miss) : DefaultMissResponse(request, miss);
  if (miss.kind == RouteMiss::Kind::kMethodNotAllowed && response.HeaderValue("Allow").empty()) {
    response.headers.push_back({"Allow", Join(miss.allowed, ", ")});
  }
  return response;
}

UpgradeResult Router::ServeUpgrade(const Request& request,
                                   std::shared_ptr<WebSocket> socket) const {
  RouteMiss miss;
  if (const Entry* e = Find("", request.Path(), true, &miss)) {
    return e->upgrade_handler(request, std::move(socket));
  }
  return DefaultMissResponse(request, miss);
}

const Route* Router::Match(std::string_view method, std::string_view path, bool upgrade) const {
  RouteMiss miss;
  const Entry* e = Find(upgrade ? "" : method, path, upgrade, &miss);
  return e == nullptr ? nullptr : &e->route;
}

std::vector<Route> Router::routes() const {
  std::vector<Route> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e->route);
  return out;
}

Handler Router::handler() const {
  return [this](const Request& request) { return Serve(request); };
}

UpgradeHandler Router::upgrade_handler() const {
  return [this](const Request& request, std::shared_ptr<WebSocket> socket) {
    return ServeUpgrade(request, std::move(socket));
  };
}

}  // namespace hpod::http
