// Console against a temporary directory, served through a real http::Router:
// the routes, headers, content types, 404s, HEAD, the bounds, and that nothing
// outside the directory is ever served.

#include "hpod/controlplane/console.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

class ConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("hpod-console-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    dist_ = base_ / "dist";
    Write(dist_ / "index.html", "<!doctype html><script type=module src=/assets/app-1a2b.js>");
    Write(dist_ / "assets" / "app-1a2b.js", "export const x = 1;");
    Write(dist_ / "assets" / "app-1a2b.css", "body{}");
    Write(dist_ / "assets" / "fonts" / "mono.woff2", std::string("wOF2\0\x01", 6));
    Write(dist_ / "assets" / "logo.svg", "<svg/>");
    Write(dist_ / "assets" / "blob.bin", "?");
    Write(dist_ / "top.txt", "not under assets/");
    Write(base_ / "secret.txt", "outside");
    // One symlink that stays inside the directory, some that lead out of it.
    fs::create_symlink("app-1a2b.js", dist_ / "assets" / "alias.js");
    fs::create_symlink("../../secret.txt", dist_ / "assets" / "secret.txt");
    fs::create_symlink(base_, dist_ / "assets" / "up");
    fs::create_symlink("missing.js", dist_ / "assets" / "broken.js");
  }
  void TearDown() override { fs::remove_all(base_); }

  // GET (or `method`) through a router holding the console's routes only.
  http::Response Get(const Console& console, const std::string& target,
                     const std::string& method = "GET") {
    http::Router router;
    EXPECT_TRUE(console.AddRoutes(router).ok());
    http::Request r;
    r.method = method;
    r.target = target;
    return router.Serve(r);
  }

  static void ExpectSecurityHeaders(const http::Response& r) {
    EXPECT_EQ(r.HeaderValue("Content-Security-Policy"), kContentSecurityPolicy);
    EXPECT_NE(std::string(kContentSecurityPolicy).find("script-src 'self';"), std::string::npos);
    EXPECT_EQ(r.HeaderValue("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r.HeaderValue("Referrer-Policy"), "no-referrer");
    EXPECT_EQ(r.HeaderValue("X-Frame-Options"), "DENY");
  }

  fs::path base_, dist_;
};

TEST_F(ConsoleTest, ServesIndexAndAssetsWithTheirHeaders) {
  auto console = Console::Load(dist_.string());
  ASSERT_TRUE(console.ok()) << console.status().ToString();
  EXPECT_TRUE((*console)->built());
  // index.html, five assets and the symlink inside; not top.txt, not the links out.
  EXPECT_EQ((*console)->file_count(), 7u);
  for (const char* target : {"/", "/index.html", "/?signin=1"}) {
    http::Response r = Get(**console, target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body.rfind("<!doctype html>", 0), 0u) << target;
    EXPECT_EQ(r.HeaderValue("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r.HeaderValue("Cache-Control"), "no-cache");
    ExpectSecurityHeaders(r);
  }
  const std::vector<std::pair<std::string, std::string>> assets = {
      {"/assets/app-1a2b.js", "text/javascript; charset=utf-8"},
      {"/assets/app-1a2b.js?v=2", "text/javascript; charset=utf-8"},
      {"/assets/app-1a2b.css", "text/css; charset=utf-8"},
      {"/assets/fonts/mono.woff2", "font/woff2"},
      {"/assets/logo.svg", "image/svg+xml"},
      {"/assets/blob.bin", "application/octet-stream"},
      {"/assets/alias.js", "text/javascript; charset=utf-8"}};
  for (const auto& [target, type] : assets) {
    http::Response r = Get(**console, target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.HeaderValue("Content-Type"), type) << target;
    EXPECT_EQ(r.HeaderValue("Cache-Control"), "public, max-age=31536000, immutable") << target;
    ExpectSecurityHeaders(r);
  }
  EXPECT_EQ(Get(**console, "/assets/fonts/mono.woff2").body, std::string("wOF2\0\x01", 6));
  EXPECT_EQ(Get(**console, "/assets/alias.js").body, "export const x = 1;");
  // HEAD is served by the GET route (the server then drops the body).
  http::Response head = Get(**console, "/assets/app-1a2b.js", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.HeaderValue("Content-Type"), "text/javascript; charset=utf-8");
}

TEST_F(ConsoleTest, NothingOutsideTheDirectoryOrUnknownIsServed) {
  auto console = Console::Load(dist_.string());
  ASSERT_TRUE(console.ok()) << console.status().ToString();
  for (const char* target : {"/assets/nope.js", "/assets/secret.txt", "/assets/up/secret.txt",
                             "/assets/broken.js", "/assets/../secret.txt", "/assets/../index.html",
                             "/assets/%2e%2e/secret.txt", "/assets/fonts/../app-1a2b.js",
                             "/assets//app-1a2b.js", "/assets/fonts", "/assets/APP-1A2B.JS"}) {
    http::Response r = Get(**console, target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("outside"), std::string::npos) << target;
    EXPECT_EQ(r.HeaderValue("Content-Type"), "text/plain; charset=utf-8") << target;
    ExpectSecurityHeaders(r);
  }
  // Only /, /index.html and /assets/* are console routes: the rest is the
  // listener's miss handler's (the API's answer in hpodd).
  http::Router router;
  ASSERT_TRUE((*console)->AddRoutes(router).ok());
  EXPECT_EQ(router.Match("GET", "/top.txt"), nullptr);
  EXPECT_EQ(router.Match("GET", "/assets"), nullptr);
  EXPECT_EQ(router.Match("POST", "/"), nullptr);
  ASSERT_NE(router.Match("GET", "/assets/x"), nullptr);
  EXPECT_EQ(router.Match("GET", "/assets/x")->auth, http::AuthRule::kNone);
}

TEST_F(ConsoleTest, LoadFailsWithoutIndexOrPastItsBounds) {
  EXPECT_EQ(Console::Load((base_ / "none").string()).status().code(), StatusCode::kNotFound);
  fs::remove(dist_ / "index.html");
  EXPECT_EQ(Console::Load(dist_.string()).status().code(), StatusCode::kNotFound);
  // An index.html that leads out of the directory is no index.html.
  fs::create_symlink("../secret.txt", dist_ / "index.html");
  EXPECT_EQ(Console::Load(dist_.string()).status().code(), StatusCode::kNotFound);
  fs::remove(dist_ / "index.html");
  Write(dist_ / "index.html", "<!doctype html>");
  ConsoleOptions few;
  few.max_files = 3;
  auto r = Console::Load(dist_.string(), few);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("more than 3 files"), std::string::npos);
  ConsoleOptions small;
  small.max_total_bytes = 40;
  EXPECT_EQ(Console::Load(dist_.string(), small).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Console::Load(dist_.string()).ok());
}

TEST_F(ConsoleTest, WithoutAConsoleEveryRouteSaysHowToBuildIt) {
  auto console = Console::NotBuilt("no index.html in /x");
  EXPECT_FALSE(console->built());
  for (const char* target : {"/", "/index.html", "/assets/app.js"}) {
    http::Response r = Get(*console, target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body,
              "The hpod console is not built (no index.html in /x): run `make` in the hpod source "
              "tree (it builds web/ into build/web/dist), or start hpodd with --console-dir "
              "DIR.\n");
    ExpectSecurityHeaders(r);
  }
}

TEST_F(ConsoleTest, HpoddLooksBesideItselfThenInItsBuildTree) {
  fs::path build = base_ / "build";
  Write(build / "CMakeCache.txt", "");
  const std::string hpodd = (build / "cmd" / "hpodd" / "hpodd").string();
  const std::string fake = (build / "tests" / "hpodd-fake").string();
  EXPECT_EQ(ConsoleDirCandidates(hpodd),
            (std::vector<std::string>{(build / "cmd" / "share" / "hpod" / "console").string(),
                                      (build / "web" / "dist").string()}));
  EXPECT_EQ(ConsoleDirCandidates(fake),
            (std::vector<std::string>{(build / "share" / "hpod" / "console").string(),
                                      (build / "web" / "dist").string()}));
  const std::string installed = (base_ / "usr" / "bin" / "hpodd").string();
  EXPECT_EQ(ConsoleDirCandidates(installed),
            std::vector<std::string>{(base_ / "usr" / "share" / "hpod" / "console").string()});

  // Nothing built: no dir, and where it looked.
  ConsoleOptions none = ResolveConsoleOptions("", hpodd);
  EXPECT_EQ(none.dir, "");
  EXPECT_FALSE(none.required);
  EXPECT_EQ(none.searched, ConsoleDirCandidates(hpodd));
  // The build tree's console, then an installed one first.
  Write(build / "web" / "dist" / "index.html", "x");
  EXPECT_EQ(ResolveConsoleOptions("", hpodd).dir, (build / "web" / "dist").string());
  Write(build / "cmd" / "share" / "hpod" / "console" / "index.html", "x");
  EXPECT_EQ(ResolveConsoleOptions("", hpodd).dir,
            (build / "cmd" / "share" / "hpod" / "console").string());
  // An explicit directory is taken as given, and must load.
  ConsoleOptions flag = ResolveConsoleOptions("/somewhere", hpodd);
  EXPECT_EQ(flag.dir, "/somewhere");
  EXPECT_TRUE(flag.required);
}

}  // namespace
}  // namespace hpod::controlplane
