#include "hpod/http/router.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

namespace hpod::http {
namespace {

Request Req(std::string method, std::string target) {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

Handler Answer(std::string body) {
  return [body](const Request&) {
    Response r;
    r.body = body;
    return r;
  };
}

UpgradeHandler Refuse(int status, std::string body) {
  return [status, body](const Request&, std::shared_ptr<WebSocket>) -> UpgradeResult {
    Response r;
    r.status = status;
    r.body = body;
    return r;
  };
}

TEST(RouterTest, MatchesMethodAndExactPath) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/", AuthRule::kSigV4, Answer("api")).ok());
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  EXPECT_EQ(router.Serve(Req("POST", "/")).body, "api");
  EXPECT_EQ(router.Serve(Req("GET", "/healthz")).body, "health");
  // The query string is not part of the path.
  EXPECT_EQ(router.Serve(Req("GET", "/healthz?verbose=1")).body, "health");
  EXPECT_EQ(router.Serve(Req("GET", "/healthz/")).status, 404);
}

TEST(RouterTest, UnknownPathIs404InTheAwsJsonShape) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  Response r = router.Serve(Req("POST", "/foo"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.HeaderValue("Allow"), "");
  EXPECT_EQ(r.HeaderValue("x-amzn-ErrorType"), "NotFoundException");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["__type"], "NotFoundException");
  EXPECT_EQ(body["message"], "hpod serves nothing at /foo (got POST /foo)");
}

TEST(RouterTest, KnownPathWithAnotherMethodIs405WithAllow) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/", AuthRule::kSigV4, Answer("post")).ok());
  ASSERT_TRUE(router.Add("PUT", "/", AuthRule::kSigV4, Answer("put")).ok());
  Response r = router.Serve(Req("GET", "/"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.HeaderValue("Allow"), "POST, PUT");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["__type"], "MethodNotAllowedException");
  EXPECT_EQ(body["message"], "hpod serves / as POST, PUT (got GET /)");
}

TEST(RouterTest, HeadIsServedByGetAndListedInAllow) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  EXPECT_EQ(router.Serve(Req("HEAD", "/healthz")).body, "health");
  Response r = router.Serve(Req("DELETE", "/healthz"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.HeaderValue("Allow"), "GET, HEAD");
}

TEST(RouterTest, PrefixRoutesServeThePathsBelowThem) {
  Router router;
  ASSERT_TRUE(router.AddPrefix("GET", "/static/", AuthRule::kNone, Answer("static")).ok());
  ASSERT_TRUE(router.AddPrefix("GET", "/static/js/", AuthRule::kNone, Answer("js")).ok());
  ASSERT_TRUE(router.Add("GET", "/static/js/app.js", AuthRule::kNone, Answer("exact")).ok());
  EXPECT_EQ(router.Serve(Req("GET", "/static/index.html")).body, "static");
  EXPECT_EQ(router.Serve(Req("GET", "/static/js/lib.js")).body, "js");     // longer prefix wins
  EXPECT_EQ(router.Serve(Req("GET", "/static/js/app.js")).body, "exact");  // exact wins
  // A prefix covers what lies below it, not itself or a sibling with a longer name.
  EXPECT_EQ(router.Serve(Req("GET", "/static")).status, 404);
  EXPECT_EQ(router.Serve(Req("GET", "/static/")).status, 404);
  EXPECT_EQ(router.Serve(Req("GET", "/staticfoo")).status, 404);
  Response r = router.Serve(Req("POST", "/static/x"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.HeaderValue("Allow"), "GET, HEAD");
}

TEST(RouterTest, AMethodOnAShorterPatternStillServes) {
  Router router;
  ASSERT_TRUE(router.AddPrefix("POST", "/files/", AuthRule::kSigV4, Answer("upload")).ok());
  ASSERT_TRUE(router.Add("GET", "/files/readme", AuthRule::kNone, Answer("readme")).ok());
  EXPECT_EQ(router.Serve(Req("POST", "/files/readme")).body, "upload");
  EXPECT_EQ(router.Serve(Req("GET", "/files/readme")).body, "readme");
  EXPECT_EQ(router.Serve(Req("PUT", "/files/readme")).HeaderValue("Allow"), "POST, GET, HEAD");
}

TEST(RouterTest, MatchCarriesTheAuthRule) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/", AuthRule::kSigV4, Answer("api")).ok());
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  ASSERT_TRUE(router.Add("GET", "/metrics", AuthRule::kBearerToken, Answer("metrics")).ok());
  ASSERT_TRUE(router.AddUpgrade("/agent/v1/channel", AuthRule::kAgentToken, Refuse(401, "x")).ok());
  ASSERT_TRUE(
      router.AddUpgradePrefix("/v1/sessions/", AuthRule::kSessionToken, Refuse(401, "x")).ok());
  ASSERT_NE(router.Match("POST", "/"), nullptr);
  EXPECT_EQ(router.Match("POST", "/")->auth, AuthRule::kSigV4);
  EXPECT_EQ(router.Match("GET", "/healthz")->auth, AuthRule::kNone);
  EXPECT_EQ(router.Match("GET", "/metrics")->auth, AuthRule::kBearerToken);
  EXPECT_EQ(router.Match("HEAD", "/metrics")->auth, AuthRule::kBearerToken);
  EXPECT_EQ(router.Match("", "/agent/v1/channel", true)->auth, AuthRule::kAgentToken);
  EXPECT_EQ(router.Match("", "/v1/sessions/abc", true)->auth, AuthRule::kSessionToken);
  EXPECT_EQ(router.Match("GET", "/"), nullptr);
  // Upgrade routes and plain routes are apart.
  EXPECT_EQ(router.Match("GET", "/agent/v1/channel"), nullptr);
  EXPECT_EQ(router.Match("", "/healthz", true), nullptr);

  std::vector<std::string> table;
  for (const Route& r : router.routes()) table.push_back(r.ToString());
  EXPECT_EQ(table, (std::vector<std::string>{
                       "POST / (sigv4)", "GET /healthz (none)", "GET /metrics (bearer-token)",
                       "WS /agent/v1/channel (agent-token)", "WS /v1/sessions/* (session-token)"}));
}

TEST(RouterTest, UpgradesAreRoutedByPath) {
  Router router;
  ASSERT_TRUE(
      router.AddUpgrade("/agent/v1/channel", AuthRule::kAgentToken, Refuse(401, "channel")).ok());
  ASSERT_TRUE(
      router.AddUpgradePrefix("/v1/sessions/", AuthRule::kSessionToken, Refuse(403, "session"))
          .ok());
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  auto serve = [&](const std::string& target) {
    UpgradeResult result = router.ServeUpgrade(Req("GET", target), nullptr);
    EXPECT_TRUE(std::holds_alternative<Response>(result));
    return std::get<Response>(result);
  };
  EXPECT_EQ(serve("/agent/v1/channel").body, "channel");
  EXPECT_EQ(serve("/v1/sessions/s-1?x=1").body, "session");
  // A plain route does not take upgrades, and an unrouted upgrade is a 404.
  Response r = serve("/healthz");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(nlohmann::json::parse(r.body)["__type"], "NotFoundException");
  EXPECT_EQ(serve("/v1/sessions").status, 404);
}

TEST(RouterTest, MissHandlerAnswersMissesAndAllowIsStillAdded) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/", AuthRule::kSigV4, Answer("api")).ok());
  std::vector<RouteMiss::Kind> seen;
  router.SetMissHandler([&](const Request&, const RouteMiss& miss) {
    seen.push_back(miss.kind);
    Response r;
    r.status = 400;
    r.body = "custom";
    return r;
  });
  Response wrong_method = router.Serve(Req("GET", "/"));
  EXPECT_EQ(wrong_method.status, 400);
  EXPECT_EQ(wrong_method.body, "custom");
  EXPECT_EQ(wrong_method.HeaderValue("Allow"), "POST");
  Response unknown = router.Serve(Req("POST", "/foo"));
  EXPECT_EQ(unknown.body, "custom");
  EXPECT_EQ(unknown.HeaderValue("Allow"), "");
  EXPECT_EQ(seen, (std::vector<RouteMiss::Kind>{RouteMiss::Kind::kMethodNotAllowed,
                                                RouteMiss::Kind::kNotFound}));
  router.SetMissHandler(nullptr);
  EXPECT_EQ(router.Serve(Req("POST", "/foo")).status, 404);
}

TEST(RouterTest, RefusesBadAndDuplicateRoutes) {
  Router router;
  EXPECT_EQ(router.Add("", "/", AuthRule::kNone, Answer("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("get", "/", AuthRule::kNone, Answer("")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "healthz", AuthRule::kNone, Answer("")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(router.AddPrefix("GET", "/static", AuthRule::kNone, Answer("")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "/x", AuthRule::kNone, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(router.AddUpgrade("/ws", AuthRule::kNone, nullptr).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(router.Add("GET", "/x", AuthRule::kNone, Answer("")).ok());
  EXPECT_EQ(router.Add("GET", "/x", AuthRule::kSigV4, Answer("")).code(),
            StatusCode::kAlreadyExists);
  // Another method, a prefix or an upgrade on the same path is another route.
  EXPECT_TRUE(router.Add("POST", "/x", AuthRule::kNone, Answer("")).ok());
  EXPECT_TRUE(router.AddPrefix("GET", "/x/", AuthRule::kNone, Answer("")).ok());
  EXPECT_TRUE(router.AddUpgrade("/x", AuthRule::kNone, Refuse(404, "")).ok());
  EXPECT_EQ(router.routes().size(), 4u);
}

TEST(RouterTest, HandlersBoundForTheServerUseTheRouter) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/healthz", AuthRule::kNone, Answer("health")).ok());
  ASSERT_TRUE(router.AddUpgrade("/ws", AuthRule::kNone, Refuse(401, "ws")).ok());
  Handler h = router.handler();
  UpgradeHandler u = router.upgrade_handler();
  EXPECT_EQ(h(Req("GET", "/healthz")).body, "health");
  EXPECT_EQ(std::get<Response>(u(Req("GET", "/ws"), nullptr)).body, "ws");
}

}  // namespace
}  // namespace hpod::http
