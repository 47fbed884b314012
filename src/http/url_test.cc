#include <gtest/gtest.h>

#include "hpod/http/client.h"

namespace hpod::http {
namespace {

struct GoodCase {
  const char* url;
  const char* scheme;
  const char* host;
  int port;
  const char* target;
  const char* host_header;
};

TEST(ParseUrlTest, AcceptsHttpAndHttpsUrls) {
  const GoodCase cases[] = {
      {"http://127.0.0.1:8080/path?q=1", "http", "127.0.0.1", 8080, "/path?q=1", "127.0.0.1:8080"},
      {"https://example.com", "https", "example.com", 443, "/", "example.com"},
      {"http://example.com:80/", "http", "example.com", 80, "/", "example.com"},
      {"https://example.com:443/a", "https", "example.com", 443, "/a", "example.com"},
      {"https://example.com:80/", "https", "example.com", 80, "/", "example.com:80"},
      {"http://example.com:443/", "http", "example.com", 443, "/", "example.com:443"},
      {"http://[::1]:9000/x", "http", "[::1]", 9000, "/x", "[::1]:9000"},
      {"http://[::1]/", "http", "[::1]", 80, "/", "[::1]"},
      {"https://[fe80::1%25eth0]:8443", "https", "[fe80::1%25eth0]", 8443, "/",
       "[fe80::1%25eth0]:8443"},
      {"HTTP://Example.com?x=1", "http", "Example.com", 80, "/?x=1", "Example.com"},
      {"http://h/p#fragment", "http", "h", 80, "/p", "h"},
      {"http://h#fragment", "http", "h", 80, "/", "h"},
      {"http://h:/p", "http", "h", 80, "/p", "h"},
      {"http://h:65535", "http", "h", 65535, "/", "h:65535"},
      {"http://h:1/a/b/c?d=e&f=g", "http", "h", 1, "/a/b/c?d=e&f=g", "h:1"},
  };
  for (const GoodCase& c : cases) {
    StatusOr<Url> url = ParseUrl(c.url);
    ASSERT_TRUE(url.ok()) << c.url << ": " << url.status().ToString();
    EXPECT_EQ(url->scheme, c.scheme) << c.url;
    EXPECT_EQ(url->host, c.host) << c.url;
    EXPECT_EQ(url->port, c.port) << c.url;
    EXPECT_EQ(url->target, c.target) << c.url;
    EXPECT_EQ(url->HostHeader(), c.host_header) << c.url;
  }
}

TEST(ParseUrlTest, RejectsEverythingElse) {
  const char* cases[] = {
      "",
      "example.com",
      "ftp://example.com/",
      "ws://example.com/",
      "http:/example.com",
      "http://",
      "http:///path",
      "http://:80/",
      "http://h:0/",
      "http://h:65536/",
      "http://h:-1/",
      "http://h:+80/",
      "http://h:8x/",
      "http://[::1",
      "http://[]/",
      "http://[::1]x/",
      "http://[::1]:x/",
      "http://user:pass@h/",
      "http://h /",
      "http://h/a b",
      "http://h/\r\nX: y",
  };
  for (const char* c : cases) {
    StatusOr<Url> url = ParseUrl(c);
    EXPECT_FALSE(url.ok()) << c;
    if (!url.ok()) {
      EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << c;
    }
  }
}

}  // namespace
}  // namespace hpod::http
