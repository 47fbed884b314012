#include "hpod/cli/shorthand.h"

#include <gtest/gtest.h>

namespace hpod::cli {
namespace {

using Json = nlohmann::ordered_json;

struct Case {
  const char* input;
  const char* expected;  // JSON
};

// Inputs and results of awscli's own ShorthandParser (awscli 1.45.11).
constexpr Case kCases[] = {
    {R"(a=b)", R"({"a": "b"})"},
    {R"(a=b,c=d)", R"({"a": "b", "c": "d"})"},
    {R"(a=b,c)", R"({"a": ["b", "c"]})"},
    {R"(a=b,c,d=e)", R"({"a": ["b", "c"], "d": "e"})"},
    {R"(foo=bar baz)", R"({"foo": "bar baz"})"},
    {R"(a= b ,c=d)", R"({"a": "b", "c": "d"})"},
    {R"(a=)", R"({"a": ""})"},
    {R"(a=,b=c)", R"({"a": "", "b": "c"})"},
    {R"(a='b,c')", R"({"a": "b,c"})"},
    {R"(a="b,c")", R"({"a": "b,c"})"},
    {R"(a='it\'s')", R"({"a": "it's"})"},
    {R"(a=b\,c)", R"({"a": "b,c"})"},
    {R"(a=[b,c])", R"({"a": ["b", "c"]})"},
    {R"(a=[])", R"({"a": []})"},
    {R"(a=[b, [c,d]])", R"({"a": ["b", ["c", "d"]]})"},
    {R"(a={b=c})", R"({"a": {"b": "c"}})"},
    {R"(a={b=c,d=[e,f]})", R"({"a": {"b": "c", "d": ["e", "f"]}})"},
    {R"(a={b={c=d}},e=f)", R"({"a": {"b": {"c": "d"}}, "e": "f"})"},
    {R"(LifeCycleConfig={SourceS3Uri=s3://b/p,OnCreate=on_create.sh})",
     R"({"LifeCycleConfig": {"SourceS3Uri": "s3://b/p", "OnCreate": "on_create.sh"}})"},
    {R"(Key=team,Value=ml)", R"({"Key": "team", "Value": "ml"})"},
    {R"(SecurityGroupIds=sg-1,sg-2,Subnets=subnet-1)",
     R"({"SecurityGroupIds": ["sg-1", "sg-2"], "Subnets": "subnet-1"})"},
    {R"(a=b=c)", R"({"a": "b=c"})"},
    {R"(a=http://x.com/?q=1&r=2)", R"({"a": "http://x.com/?q=1&r=2"})"},
    {R"(a.b-c_d:e/f#g=1)", R"({"a.b-c_d:e/f#g": "1"})"},
    {R"(a=b c,d)", R"({"a": ["b c", "d"]})"},
    {R"(a=[b,{c=d}])", R"({"a": ["b", {"c": "d"}]})"},
    {R"(a="quoted \"inner\"")", R"({"a": "quoted \"inner\""})"},
    {R"(a={})", R"({"a": {}})"},
    {R"(a=[ 'x' , y ])", R"({"a": ["x", "y"]})"},
    {R"(=)", R"({"": ""})"},
    {R"(a=b,,c=d)", R"({"a": "b", "c": "d"})"},
    {R"(a=b,c=[d,e],f={g=h})", R"({"a": "b", "c": ["d", "e"], "f": {"g": "h"}})"},
};

TEST(ShorthandTest, ParsesLikeAwscli) {
  for (const Case& c : kCases) {
    StatusOr<Json> got = ParseShorthand(c.input);
    ASSERT_TRUE(got.ok()) << c.input << ": " << got.status().ToString();
    EXPECT_EQ(got->dump(), Json::parse(c.expected).dump()) << c.input;
  }
}

// Inputs awscli rejects.
constexpr const char* kErrors[] = {
    R"(a=x])", R"(a=b})", R"(k=v,)",   R"(a={b=})",          R"(a)",     R"(a=b,c=d,a=e)",
    R"(a=b,)", R"(a=[b)", R"(a={b=c)", R"(a='unterminated)", R"(a={b})",
};

TEST(ShorthandTest, RejectsWhatAwscliRejects) {
  for (const char* input : kErrors) {
    StatusOr<Json> got = ParseShorthand(input);
    EXPECT_FALSE(got.ok()) << input << " parsed as " << (got.ok() ? got->dump() : "");
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(ShorthandTest, ErrorsPointAtTheProblem) {
  StatusOr<Json> got = ParseShorthand("Key");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "Expected: '=', received: 'EOF' for input:\nKey\n   ^");
  got = ParseShorthand("a=b,c=d,a=e");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "Second instance of key \"a\" encountered for input:\na=b,c=d,a=e\n        ^\n"
            "This is often because there is a preceding \",\" instead of a space.");
  got = ParseShorthand("a={b}");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "Expected: '=', received: '}' for input:\na={b}\n    ^");
}

TEST(ShorthandTest, KeepsKeyOrder) {
  StatusOr<Json> got = ParseShorthand("z=1,a=2,m={y=1,b=2}");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->dump(), R"({"z":"1","a":"2","m":{"y":"1","b":"2"}})");
}

TEST(ShorthandTest, ParamFileValuesAreResolvedOnlyAfterAt) {
  ShorthandOptions options;
  options.load_param_file = [](std::string_view v) -> StatusOr<std::optional<std::string>> {
    if (v == "file://script.sh") return std::optional<std::string>("#!/bin/bash\n");
    if (v == "file://missing")
      return InvalidArgumentError("Unable to load paramfile file://missing");
    return std::optional<std::string>();
  };
  StatusOr<Json> got = ParseShorthand("OnCreate@=file://script.sh,Plain=file://script.sh", options);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["OnCreate"], "#!/bin/bash\n");
  EXPECT_EQ((*got)["Plain"], "file://script.sh");
  got = ParseShorthand("A={B@=file://script.sh}", options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["A"]["B"], "#!/bin/bash\n");
  EXPECT_FALSE(ParseShorthand("A@=file://missing", options).ok());
}

}  // namespace
}  // namespace hpod::cli
