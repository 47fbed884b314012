#include "hpod/agent/source_fetch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "hpod/agent/test_util.h"
#include "hpod/auth/in_memory_secret_lookup.h"
#include "hpod/auth/sigv4.h"
#include "hpod/http/server.h"

namespace hpod::agent {
namespace {

using testing::ReadTestFile;
using testing::TempDir;
using testing::WriteTestFile;

TEST(XmlTest, DecodesEntities) {
  EXPECT_EQ(XmlDecode("a&amp;b&lt;c&gt;&quot;&apos;&#65;&#x42;&#xe9;"), "a&b<c>\"'AB\xc3\xa9");
  EXPECT_EQ(XmlDecode("AT&T &bogus; &"), "AT&T &bogus; &");
}

TEST(XmlTest, ParsesListObjectsV2) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>p/a&amp;b.sh</Key><Size>3</Size></Contents>"
      "<Contents><Key>p/utils/x.sh</Key><ETag>&quot;e&quot;</ETag></Contents>"
      "<NextContinuationToken>tok&amp;1</NextContinuationToken>"
      "<KeyCountExtra>ignored</KeyCountExtra></ListBucketResult>";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->keys, (std::vector<std::string>{"p/a&b.sh", "p/utils/x.sh"}));
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "tok&1");

  auto last = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->keys.empty());
  EXPECT_FALSE(last->is_truncated);
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").ok());
  EXPECT_EQ(ParseS3ErrorCode("<Error><Code>SignatureDoesNotMatch</Code></Error>"),
            "SignatureDoesNotMatch");
}

TEST(RelativePathTest, RejectsTraversal) {
  EXPECT_EQ(*RelativePathForKey("p/utils/a.sh", "p/"), "utils/a.sh");
  EXPECT_EQ(*RelativePathForKey("p/dir/", "p/"), "");
  EXPECT_EQ(*RelativePathForKey("p//x/./y", "p/"), "x/y");
  EXPECT_FALSE(RelativePathForKey("p/../etc/passwd", "p/").ok());
  EXPECT_FALSE(RelativePathForKey("p/a/../../b", "p/").ok());
  EXPECT_FALSE(RelativePathForKey("q/a", "p/").ok());
}

using Objects = std::map<std::string, std::string>;

// An S3 that checks SigV4 like the real one and serves ListObjectsV2 two keys per
// page plus GetObject, from a map of objects.
class FakeS3 {
 public:
  explicit FakeS3(std::map<std::string, std::string> objects) : objects_(std::move(objects)) {
    http::ServerOptions options;
    server_ = std::move(
        *http::Server::Start(options, [this](const http::Request& r) { return Handle(r); }));
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  int list_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return list_calls_;
  }

 private:
  static std::string Decode(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
      } else {
        out.push_back(s[i]);
      }
    }
    return out;
  }
  static std::string Param(std::string_view query, const std::string& name) {
    size_t pos = 0;
    while (pos <= query.size()) {
      size_t amp = query.find('&', pos);
      if (amp == std::string_view::npos) amp = query.size();
      std::string_view piece = query.substr(pos, amp - pos);
      if (piece.rfind(name + "=", 0) == 0) return Decode(piece.substr(name.size() + 1));
      pos = amp + 1;
    }
    return "";
  }
  static http::Response Error(int status, const std::string& code) {
    return http::Response{status, {}, "<Error><Code>" + code + "</Code></Error>"};
  }

  http::Response Handle(const http::Request& request) {
    auth::SignableRequest signable{request.method, request.target, {}, request.body};
    for (const auto& h : request.headers) signable.headers.emplace_back(h.name, h.value);
    auth::InMemorySecretLookup secrets(auth::InMemorySecretLookup::SecretMap{{"AKID", "SECRET"}});
    auth::VerifyOptions verify;
    verify.service = "s3";
    verify.region = "us-east-1";
    auto caller = auth::VerifyRequest(signable, secrets, verify, std::chrono::system_clock::now());
    if (!caller.ok()) return Error(403, "SignatureDoesNotMatch");
    if (request.HeaderValue("x-amz-content-sha256").empty()) return Error(400, "MissingHeader");
    std::string path(request.Path());
    std::string query(request.Query());
    if (path == "/b" || path == "/b/") {
      std::lock_guard<std::mutex> lock(mu_);
      ++list_calls_;
      if (Param(query, "list-type") != "2") return Error(400, "InvalidArgument");
      std::string prefix = Param(query, "prefix");
      std::string token = Param(query, "continuation-token");
      std::string body = "<ListBucketResult>";
      int count = 0;
      std::string last;
      bool truncated = false;
      for (const auto& [key, data] : objects_) {
        if (key.rfind(prefix, 0) != 0 || (!token.empty() && key <= token)) continue;
        if (count == 2) {
          truncated = true;
          break;
        }
        body += "<Contents><Key>" + key + "</Key></Contents>";
        last = key;
        ++count;
      }
      body += std::string("<IsTruncated>") + (truncated ? "true" : "false") + "</IsTruncated>";
      if (truncated) body += "<NextContinuationToken>" + last + "</NextContinuationToken>";
      return http::Response{200, {}, body + "</ListBucketResult>"};
    }
    if (path.rfind("/b/", 0) == 0) {
      auto it = objects_.find(Decode(path.substr(3)));
      if (it == objects_.end()) return Error(404, "NoSuchKey");
      return http::Response{200, {}, it->second};
    }
    return Error(404, "NoSuchBucket");
  }

  const std::map<std::string, std::string> objects_;
  mutable std::mutex mu_;
  int list_calls_ = 0;
  std::unique_ptr<http::Server> server_;
};

FetchOptions S3Options(const FakeS3& s3, const std::string& uri, const std::string& secret) {
  FetchOptions options;
  options.source_uri = uri;
  options.on_create = "on_create.sh";
  options.s3 = S3Access{s3.endpoint(), "us-east-1", "AKID", secret};
  return options;
}

TEST(S3FetchTest, FetchesWholePrefixWithNestedKeysAcrossPages) {
  FakeS3 s3({{"p/on_create.sh", "#!/bin/sh\necho hi\n"},
             {"p/provisioning_parameters.json", "{}"},
             {"p/utils/lib/helper.sh", "helper"},
             {"p/utils/", ""},
             {"p/z.txt", "z"},
             {"other/x", "not mine"}});
  TempDir dir;
  Status s = FetchSource(S3Options(s3, "s3://b/p", "SECRET"), dir / "src", RealClock::Get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadTestFile(dir / "src/on_create.sh"), "#!/bin/sh\necho hi\n");
  EXPECT_EQ(ReadTestFile(dir / "src/utils/lib/helper.sh"), "helper");
  EXPECT_EQ(ReadTestFile(dir / "src/z.txt"), "z");
  EXPECT_FALSE(std::filesystem::exists(dir / "src/x"));
  EXPECT_GE(s3.list_calls(), 3);  // 5 keys at 2 per page
}

TEST(S3FetchTest, WrongSecretIsAccessDenied) {
  FakeS3 s3(Objects{{"p/on_create.sh", "x"}});
  TempDir dir;
  Status s = FetchSource(S3Options(s3, "s3://b/p/", "WRONG"), dir / "src", RealClock::Get());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Access denied to s3://b/p/ (SignatureDoesNotMatch)");
}

TEST(S3FetchTest, EmptyPrefixSaysNoObjects) {
  FakeS3 s3(Objects{{"q/on_create.sh", "x"}});
  TempDir dir;
  Status s = FetchSource(S3Options(s3, "s3://b/p/", "SECRET"), dir / "src", RealClock::Get());
  EXPECT_EQ(s.message(), "No objects found under s3://b/p/");
}

TEST(S3FetchTest, MissingOnCreateIsNamed) {
  FakeS3 s3(Objects{{"p/other.sh", "x"}});
  TempDir dir;
  Status s = FetchSource(S3Options(s3, "s3://b/p/", "SECRET"), dir / "src", RealClock::Get());
  EXPECT_EQ(s.message(), "OnCreate file on_create.sh not found under s3://b/p/");
}

TEST(S3FetchTest, UnreachableEndpointIsNamed) {
  FetchOptions options;
  options.source_uri = "s3://b/p/";
  options.on_create = "on_create.sh";
  options.s3 = S3Access{"http://127.0.0.1:1", "us-east-1", "AKID", "SECRET"};
  TempDir dir;
  Status s = FetchSource(options, dir / "src", RealClock::Get());
  EXPECT_EQ(s.message(), "Could not reach S3 endpoint http://127.0.0.1:1");
}

TEST(FileFetchTest, CopiesTreeKeepingModes) {
  TempDir dir;
  WriteTestFile(dir / "source/on_create.sh", "#!/bin/sh\n", 0755);
  WriteTestFile(dir / "source/utils/a.txt", "a", 0600);
  FetchOptions options;
  options.source_uri = "file://" + dir.path() + "/source/";
  options.on_create = "on_create.sh";
  Status s = FetchSource(options, dir / "dest/src", RealClock::Get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadTestFile(dir / "dest/src/utils/a.txt"), "a");
  struct stat st;
  ASSERT_EQ(::stat((dir / "dest/src/on_create.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((dir / "dest/src/utils/a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  options.source_uri = "file://" + dir.path() + "/nothing/";
  EXPECT_EQ(FetchSource(options, dir / "dest2", RealClock::Get()).message(),
            "No objects found under " + options.source_uri + " " + kFileSourceHint);
  // The hint says why a node may not see a host directory, and what to do.
  EXPECT_NE(std::string(kFileSourceHint).find("has its own /tmp"), std::string::npos);
}

}  // namespace
}  // namespace hpod::agent
