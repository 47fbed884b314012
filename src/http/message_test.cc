#include "hpod/http/message.h"

#include <gtest/gtest.h>

namespace hpod::http {
namespace {

TEST(FindHeaderTest, IsCaseInsensitiveAndReturnsTheFirstMatch) {
  std::vector<Header> headers = {{"Content-Type", "application/json"},
                                 {"X-Amz-Target", "SageMaker.ListClusters"},
                                 {"x-amz-target", "second"}};
  EXPECT_EQ(FindHeader(headers, "content-type"), "application/json");
  EXPECT_EQ(FindHeader(headers, "CONTENT-TYPE"), "application/json");
  EXPECT_EQ(FindHeader(headers, "X-AMZ-TARGET"), "SageMaker.ListClusters");
  EXPECT_EQ(FindHeader(headers, "Content-Length"), "");
  EXPECT_EQ(FindHeader(headers, "Content-Typ"), "");
  EXPECT_EQ(FindHeader({}, "Host"), "");
}

TEST(HeaderListTest, SplitsEveryMatchingHeaderAtCommasAndTrims) {
  std::vector<Header> headers = {{"Sec-WebSocket-Protocol", "hpod-session, hpod-token.abc"},
                                 {"Host", "a, b"},
                                 {"sec-websocket-protocol", " \tx ,, ,y\t"},
                                 {"Sec-WebSocket-Protocol", ""}};
  EXPECT_EQ(HeaderList(headers, "Sec-WebSocket-Protocol"),
            (std::vector<std::string>{"hpod-session", "hpod-token.abc", "x", "y"}));
  EXPECT_EQ(HeaderList(headers, "host"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(HeaderList(headers, "Authorization").empty());
  EXPECT_TRUE(HeaderList({{"X", " , ,"}}, "x").empty());
}

TEST(RequestTest, HeaderValueUsesFindHeader) {
  Request request;
  request.headers = {{"Host", "example.com"}};
  EXPECT_EQ(request.HeaderValue("host"), "example.com");
  Response response;
  response.headers = {{"x-amzn-RequestId", "abc"}};
  EXPECT_EQ(response.HeaderValue("X-Amzn-RequestId"), "abc");
}

TEST(RequestTest, PathAndQuery) {
  struct Case {
    const char* target;
    const char* path;
    const char* query;
  };
  for (const Case& c : std::vector<Case>{{"/", "/", ""},
                                         {"/a/b?x=1&y=2", "/a/b", "x=1&y=2"},
                                         {"/a?", "/a", ""},
                                         {"/?x", "/", "x"},
                                         {"/a?b?c", "/a", "b?c"},
                                         {"", "", ""}}) {
    Request request;
    request.target = c.target;
    EXPECT_EQ(request.Path(), c.path) << c.target;
    EXPECT_EQ(request.Query(), c.query) << c.target;
  }
}

}  // namespace
}  // namespace hpod::http
