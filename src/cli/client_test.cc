#include "hpod/cli/client.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"

namespace hpod::cli {
namespace {

const api::Operation& Op(const char* name) { return *api::ServiceModel::Get().FindOperation(name); }

class ClientTest : public ::testing::Test {
 protected:
  ApiClient MakeClient(int max_attempts = 3, bool sign = true) {
    ApiClientOptions options;
    options.endpoint_url = "http://127.0.0.1:8450/";
    options.region = "us-west-2";
    options.max_attempts = max_attempts;
    if (sign) options.credentials = auth::Credentials{"AKIDEXAMPLE", "s3cr3t", "sessiontok"};
    options.random = [] { return 0.5; };
    options.debug = &debug_;
    return ApiClient(options, transport_, clock_, sleeper_);
  }

  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  std::ostringstream debug_;
};

TEST_F(ClientTest, SendsASignedJson11Request) {
  transport_.Queue("DescribeCluster",
                   {JsonResponse(200, {{"ClusterName", "c"}, {"ClusterStatus", "InService"}})});
  ApiClient client = MakeClient();
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["ClusterStatus"], "InService");
  ASSERT_EQ(transport_.calls.size(), 1u);
  const auto& call = transport_.calls[0];
  EXPECT_EQ(call.url, "http://127.0.0.1:8450/");
  EXPECT_EQ(call.request.method, "POST");
  EXPECT_EQ(call.request.target, "/");
  EXPECT_EQ(call.request.HeaderValue("Host"), "127.0.0.1:8450");
  EXPECT_EQ(call.request.HeaderValue("Content-Type"), "application/x-amz-json-1.1");
  EXPECT_EQ(call.request.HeaderValue("X-Amz-Target"), "SageMaker.DescribeCluster");
  EXPECT_EQ(call.body, Json({{"ClusterName", "c"}}));
  std::string auth(call.request.HeaderValue("Authorization"));
  EXPECT_EQ(
      auth.rfind(
          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-west-2/sagemaker/aws4_request", 0),
      0u)
      << auth;
  EXPECT_EQ(call.request.HeaderValue("X-Amz-Security-Token"), "sessiontok");
  EXPECT_FALSE(call.request.HeaderValue("X-Amz-Date").empty());
}

TEST_F(ClientTest, UnsignedWithoutCredentials) {
  ApiClient client = MakeClient(3, /*sign=*/false);
  ASSERT_TRUE(client.Call(Op("DeleteCluster"), {{"ClusterName", "c"}}).ok());
  EXPECT_TRUE(transport_.calls[0].request.HeaderValue("Authorization").empty());
}

TEST_F(ClientTest, DebugTraceRedactsSecrets) {
  ApiClient client = MakeClient();
  ASSERT_TRUE(client.Call(Op("DeleteCluster"), {{"ClusterName", "c"}}).ok());
  std::string trace = debug_.str();
  EXPECT_NE(trace.find("Signature=<redacted>"), std::string::npos) << trace;
  EXPECT_NE(trace.find("X-Amz-Security-Token: <redacted>"), std::string::npos);
  EXPECT_NE(trace.find("{\"ClusterName\":\"c\"}"), std::string::npos);
  EXPECT_EQ(trace.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(trace.find("sessiontok"), std::string::npos);
  std::string signature(transport_.calls[0].request.HeaderValue("Authorization"));
  signature = signature.substr(signature.find("Signature=") + 10);
  EXPECT_EQ(trace.find(signature), std::string::npos);
}

TEST_F(ClientTest, ServiceErrorsReadLikeTheCli) {
  transport_.Queue("DescribeCluster",
                   {JsonResponse(400, {{"__type", "com.amazonaws.sagemaker#ResourceNotFound"},
                                       {"message", "Cluster x not found."}})});
  ApiClient client = MakeClient();
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "x"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "An error occurred (ResourceNotFound) when calling the DescribeCluster operation: "
            "Cluster x not found.");
  EXPECT_EQ(r.status().aws_type(), "ResourceNotFound");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(transport_.calls.size(), 1u);  // not retried
  EXPECT_TRUE(sleeper_.sleeps.empty());
}

TEST_F(ClientTest, RetriesServerErrorsThenSucceeds) {
  transport_.Queue("DescribeCluster", {ErrorResponse(500, "InternalFailure", "boom"),
                                       ErrorResponse(400, "ThrottlingException", "slow down"),
                                       JsonResponse(200, {{"ClusterName", "c"}})});
  ApiClient client = MakeClient(3);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(transport_.calls.size(), 3u);
  // Jitter 0.5 of min(2^(attempt-1), 20) seconds.
  ASSERT_EQ(sleeper_.sleeps.size(), 2u);
  EXPECT_EQ(sleeper_.sleeps[0].count(), 500);
  EXPECT_EQ(sleeper_.sleeps[1].count(), 1000);
}

// As botocore: a missing idempotency token (BatchAddClusterNodes' ClientToken) is a
// fresh UUID per call, the same on that call's retries; a given one is sent as is.
TEST_F(ClientTest, FillsAMissingIdempotencyTokenOncePerCall) {
  const Json ok = {{"Successful", Json::array()}, {"Failed", Json::array()}};
  transport_.Queue("BatchAddClusterNodes",
                   {ErrorResponse(500, "InternalFailure", "boom"), JsonResponse(200, ok),
                    JsonResponse(200, ok), JsonResponse(200, ok)});
  ApiClient client = MakeClient(3);
  const Json add = {{"ClusterName", "c"},
                    {"NodesToAdd", {{{"InstanceGroupName", "w"}, {"IncrementTargetCountBy", 1}}}}};
  ASSERT_TRUE(client.Call(Op("BatchAddClusterNodes"), add).ok());
  ASSERT_TRUE(client.Call(Op("BatchAddClusterNodes"), add).ok());
  Json given = add;
  given["ClientToken"] = "mine";
  ASSERT_TRUE(client.Call(Op("BatchAddClusterNodes"), given).ok());
  ASSERT_EQ(transport_.calls.size(), 4u);
  const std::string first = transport_.calls[0].body["ClientToken"];
  EXPECT_EQ(first.size(), 36u) << first;
  EXPECT_EQ(first[14], '4') << "a version-4 UUID: " << first;
  EXPECT_EQ(transport_.calls[1].body["ClientToken"], first) << "the retry sends the same";
  EXPECT_NE(transport_.calls[2].body["ClientToken"], first) << "a new call, a new token";
  EXPECT_EQ(transport_.calls[3].body["ClientToken"], "mine");
  // Operations without one get none.
  transport_.Queue("DescribeCluster", {JsonResponse(200, {{"ClusterName", "c"}})});
  ASSERT_TRUE(client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}}).ok());
  EXPECT_EQ(transport_.calls[4].body, Json({{"ClusterName", "c"}}));
}

TEST_F(ClientTest, ExhaustedRetriesSaySo) {
  transport_.Queue("DescribeCluster", {ErrorResponse(500, "InternalFailure", "kaboom")});
  ApiClient client = MakeClient(3);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "An error occurred (InternalFailure) when calling the DescribeCluster operation "
            "(reached max retries: 2): kaboom");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport_.calls.size(), 3u);
}

TEST_F(ClientTest, GenericHtmlErrorUsesStatus) {
  http::Response html;
  html.status = 503;
  html.body = "<html><body>down</body></html>";
  transport_.Queue("DescribeCluster", {html});
  ApiClient client = MakeClient(1);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  EXPECT_EQ(r.status().message(),
            "An error occurred (503) when calling the DescribeCluster operation (reached max "
            "retries: 0): Service Unavailable");
  EXPECT_EQ(r.status().aws_type(), "503");
}

TEST_F(ClientTest, ConnectionFailure) {
  transport_.Queue("DescribeCluster", {UnavailableError("connection refused")});
  ApiClient client = MakeClient(2);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "Could not connect to the endpoint URL: \"http://127.0.0.1:8450/\"");
  EXPECT_TRUE(r.status().aws_type().empty());
  EXPECT_EQ(transport_.calls.size(), 2u);
}

// An endpoint whose certificate does not verify: the AWS CLI's line, with the
// reason, not a connection failure.
TEST_F(ClientTest, CertificateFailureSaysSo) {
  const std::string why =
      "SSL validation failed for https://127.0.0.1:8450/ SSL certificate problem: unable to get "
      "local issuer certificate";
  transport_.Queue("DescribeCluster", {UnavailableError(why)});
  ApiClient client = MakeClient(1);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), why);
}

TEST_F(ClientTest, InvalidJsonResponse) {
  http::Response bad;
  bad.status = 200;
  bad.body = "{not json";
  transport_.Queue("DescribeCluster", {bad});
  ApiClient client = MakeClient(1);
  StatusOr<Json> r = client.Call(Op("DescribeCluster"), {{"ClusterName", "c"}});
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

// ListClusters pages keyed by the request's NextToken, as the golden stub serves them.
void ServeThreePages(FakeTransport& t) {
  t.On("ListClusters", [](const Json& body) -> StatusOr<http::Response> {
    std::string token = body.value("NextToken", "");
    if (token.empty()) {
      return JsonResponse(200, Json::parse(R"({"ClusterSummaries": [{"ClusterName": "c1"},
          {"ClusterName": "c2"}], "NextToken": "tok1"})"));
    }
    if (token == "tok1") {
      return JsonResponse(
          200,
          Json::parse(R"({"ClusterSummaries": [{"ClusterName": "c3"}], "NextToken": "tok2"})"));
    }
    return JsonResponse(200, Json::parse(R"({"ClusterSummaries": [], "NextToken": ""})"));
  });
}

std::vector<std::string> Names(const Json& merged) {
  std::vector<std::string> names;
  for (const auto& s : merged["ClusterSummaries"]) names.push_back(s["ClusterName"]);
  return names;
}

TEST_F(ClientTest, PaginateFollowsAndMerges) {
  ServeThreePages(transport_);
  ApiClient client = MakeClient();
  PaginationOptions options;
  options.page_size = 2;
  StatusOr<PaginatedResult> r = Paginate(client, Op("ListClusters"), Json::object(), options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pages.size(), 3u);
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c1", "c2", "c3"}));
  EXPECT_FALSE(r->merged.contains("NextToken"));
  EXPECT_FALSE(r->resume_token.has_value());
  ASSERT_EQ(transport_.calls.size(), 3u);
  EXPECT_EQ(transport_.calls[0].body.dump(), R"({"MaxResults":2})");
  EXPECT_EQ(transport_.calls[1].body.dump(), R"({"MaxResults":2,"NextToken":"tok1"})");
  EXPECT_EQ(transport_.calls[2].body.dump(), R"({"MaxResults":2,"NextToken":"tok2"})");
}

TEST_F(ClientTest, MaxItemsTokensMatchTheCli) {
  ServeThreePages(transport_);
  ApiClient client = MakeClient();
  PaginationOptions one;
  one.max_items = 1;
  StatusOr<PaginatedResult> r = Paginate(client, Op("ListClusters"), Json::object(), one);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c1"}));
  // base64('{"NextToken": null, "boto_truncate_amount": 1}'), as aws printed it.
  EXPECT_EQ(r->resume_token, "eyJOZXh0VG9rZW4iOiBudWxsLCAiYm90b190cnVuY2F0ZV9hbW91bnQiOiAxfQ==");
  EXPECT_EQ(r->merged["NextToken"], *r->resume_token);

  PaginationOptions resume;
  resume.starting_token = *r->resume_token;
  resume.max_items = 1;
  r = Paginate(client, Op("ListClusters"), Json::object(), resume);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c2"}));
  EXPECT_EQ(r->resume_token, "eyJOZXh0VG9rZW4iOiAidG9rMSJ9");  // {"NextToken": "tok1"}

  PaginationOptions rest;
  rest.starting_token = *r->resume_token;
  r = Paginate(client, Op("ListClusters"), Json::object(), rest);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c3"}));

  PaginationOptions raw;  // a bare service token works as a starting token too
  raw.starting_token = "tok1";
  r = Paginate(client, Op("ListClusters"), Json::object(), raw);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c3"}));

  // Like botocore's b64decode, characters outside the alphabet (a token wrapped
  // by a terminal) are skipped.
  PaginationOptions wrapped;
  wrapped.starting_token = "eyJOZXh0VG9rZW4iOiAi\ndG9rMSJ9";
  const size_t first_call = transport_.calls.size();
  r = Paginate(client, Op("ListClusters"), Json::object(), wrapped);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(r->merged), (std::vector<std::string>{"c3"}));
  ASSERT_GT(transport_.calls.size(), first_call);
  EXPECT_EQ(transport_.calls[first_call].body.dump(), R"({"NextToken":"tok1"})");
}

TEST_F(ClientTest, RepeatedTokenFails) {
  transport_.Queue(
      "ListClusters",
      {JsonResponse(
          200,
          Json::parse(R"({"ClusterSummaries": [{"ClusterName": "c"}], "NextToken": "same"})"))});
  ApiClient client = MakeClient();
  StatusOr<PaginatedResult> r = Paginate(client, Op("ListClusters"), Json::object(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.status().message(),
      "Error during pagination: The same next token was received twice: {'NextToken': 'same'}");
}

}  // namespace
}  // namespace hpod::cli
