#include "hpod/agent/source_fetch.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hpod/auth/sigv4.h"
#include "hpod/base/crypto.h"
#include "hpod/http/client.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

// Finds the first element <tag>…</tag> in [from, xml.size()) and returns its raw
// inner text; `pos` receives the index just past the closing tag. Attributes on the
// opening tag and the self-closing form are accepted.
std::optional<std::string_view> FindElement(std::string_view xml, std::string_view tag, size_t from,
                                            size_t* pos) {
  const std::string open = "<" + std::string(tag);
  size_t start = from;
  while ((start = xml.find(open, start)) != std::string_view::npos) {
    size_t after = start + open.size();
    if (after >= xml.size()) return std::nullopt;
    char c = xml[after];
    if (c != '>' && c != ' ' && c != '/' && c != '\t' && c != '\n' && c != '\r') {
      start = after;  // a longer tag name sharing the prefix
      continue;
    }
    size_t gt = xml.find('>', after);
    if (gt == std::string_view::npos) return std::nullopt;
    if (xml[gt - 1] == '/') {
      if (pos != nullptr) *pos = gt + 1;
      return std::string_view();
    }
    const std::string close = "</" + std::string(tag) + ">";
    size_t end = xml.find(close, gt + 1);
    if (end == std::string_view::npos) return std::nullopt;
    if (pos != nullptr) *pos = end + close.size();
    return xml.substr(gt + 1, end - gt - 1);
  }
  return std::nullopt;
}

Status WriteLocalFile(const fs::path& path, std::string_view data) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return InternalError("creating " + path.parent_path().string() + ": " + ec.message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return InternalError("writing " + path.string());
  return OkStatus();
}

bool IsTransportError(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

// A signed GET against the S3 endpoint. Transport failures become the user message.
StatusOr<http::Response> S3Get(http::Client& client, const S3Access& s3, const http::Url& base,
                               const std::string& target, const Clock& clock) {
  auth::SignableRequest signable;
  signable.method = "GET";
  signable.target = target;
  signable.headers = {{"Host", base.HostHeader()}, {"x-amz-content-sha256", HexEncode(Sha256(""))}};
  auth::Credentials credentials{s3.access_key_id, s3.secret_access_key, ""};
  Status signed_ok = auth::SignRequest(signable, credentials, s3.region, "s3", clock.Now());
  if (!signed_ok.ok()) {
    return FailedPreconditionError("Invalid S3 credentials in the lifecycle configuration: " +
                                   signed_ok.message());
  }
  http::Request request;
  request.method = "GET";
  request.target = target;
  for (auto& [name, value] : signable.headers) request.headers.push_back({name, value});
  std::string url = base.scheme + "://" + base.HostHeader() + target;
  auto response = client.Send(url, request);
  if (!response.ok()) {
    if (IsTransportError(response.status())) {
      return FailedPreconditionError("Could not reach S3 endpoint " + s3.endpoint);
    }
    return response.status();
  }
  return response;
}

// Maps a non-2xx S3 answer to the message a user can act on.
Status S3Failure(const http::Response& response, const std::string& uri) {
  std::string code = ParseS3ErrorCode(response.body);
  if (response.status == 403) {
    return FailedPreconditionError("Access denied to " + uri + " (" +
                                   (code.empty() ? "AccessDenied" : code) + ")");
  }
  if (response.status == 404) {
    return FailedPreconditionError("No objects found under " + uri + " (" +
                                   (code.empty() ? "NoSuchBucket" : code) + ")");
  }
  return FailedPreconditionError("S3 error " + std::to_string(response.status) +
                                 (code.empty() ? "" : " (" + code + ")") + " reading " + uri);
}

Status FetchS3(const FetchOptions& options, const fs::path& dest, const Clock& clock) {
  const std::string& uri = options.source_uri;
  if (!options.s3.has_value() || options.s3->endpoint.empty()) {
    return FailedPreconditionError("No S3 endpoint configured for " + uri);
  }
  std::string_view rest = std::string_view(uri).substr(5);  // after "s3://"
  size_t slash = rest.find('/');
  std::string bucket(rest.substr(0, slash));
  std::string prefix(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  if (bucket.empty()) return FailedPreconditionError("No bucket in " + uri);
  // A SourceS3Uri names a "folder": s3://b/p means the keys under p/, not p2/….
  if (!prefix.empty() && prefix.back() != '/') prefix.push_back('/');

  auto base = http::ParseUrl(options.s3->endpoint);
  if (!base.ok()) {
    return FailedPreconditionError("Invalid S3 endpoint " + options.s3->endpoint);
  }
  http::Client client(http::ClientOptions{options.connect_timeout, options.request_timeout,
                                          options.s3->unix_socket});
  std::vector<std::string> keys;
  std::string token;
  for (int page = 0; page < 10000; ++page) {
    std::string target =
        "/" + auth::UriEncode(bucket, false) + "?list-type=2&prefix=" + auth::UriEncode(prefix, false);
    if (!token.empty()) target += "&continuation-token=" + auth::UriEncode(token, false);
    HPOD_ASSIGN_OR_RETURN(http::Response response,
                          S3Get(client, *options.s3, *base, target, clock));
    if (response.status != 200) return S3Failure(response, uri);
    auto parsed = ParseListObjectsV2(response.body);
    if (!parsed.ok()) {
      return FailedPreconditionError("Unexpected answer from S3 endpoint " + options.s3->endpoint +
                                     " listing " + uri);
    }
    for (auto& key : parsed->keys) keys.push_back(std::move(key));
    if (!parsed->is_truncated) break;
    if (parsed->next_continuation_token.empty()) {
      return FailedPreconditionError("S3 endpoint " + options.s3->endpoint +
                                     " returned a truncated listing without a continuation token");
    }
    token = parsed->next_continuation_token;
  }
  if (keys.empty()) return FailedPreconditionError("No objects found under " + uri);
  for (const std::string& key : keys) {
    HPOD_ASSIGN_OR_RETURN(std::string relative, RelativePathForKey(key, prefix));
    if (relative.empty()) continue;  // a "folder" marker object
    std::string target = "/" + auth::UriEncode(bucket, false) + "/" + auth::UriEncode(key, true);
    HPOD_ASSIGN_OR_RETURN(http::Response response,
                          S3Get(client, *options.s3, *base, target, clock));
    if (response.status != 200) return S3Failure(response, uri);
    HPOD_RETURN_IF_ERROR(WriteLocalFile(dest / relative, response.body));
  }
  return OkStatus();
}

Status FetchFile(const FetchOptions& options, const fs::path& dest) {
  const std::string& uri = options.source_uri;
  fs::path source(uri.substr(7));  // after "file://"
  std::error_code ec;
  if (!fs::is_directory(source, ec) || fs::is_empty(source, ec)) {
    return FailedPreconditionError("No objects found under " + uri + " " + kFileSourceHint);
  }
  // copy_file keeps permission bits, so executable helpers stay executable.
  fs::copy(source, dest, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return FailedPreconditionError("Could not copy " + uri + ": " + ec.message());
  return OkStatus();
}

Status FetchHttp(const FetchOptions& options, const fs::path& dest) {
  std::string prefix = options.source_uri;
  if (prefix.back() != '/') prefix.push_back('/');
  http::Client client(http::ClientOptions{options.connect_timeout, options.request_timeout});
  auto get = [&](const std::string& name, bool required) -> Status {
    const std::string url = prefix + name;
    auto parsed = http::ParseUrl(url);
    if (!parsed.ok()) return FailedPreconditionError("Invalid lifecycle source " + url);
    http::Request request;
    request.method = "GET";
    request.target = parsed->target;
    request.headers = {{"Host", parsed->HostHeader()}};
    auto response = client.Send(url, request);
    if (!response.ok()) {
      if (IsTransportError(response.status())) {
        return FailedPreconditionError("Could not reach " + url);
      }
      return response.status();
    }
    if (response->status == 200) return WriteLocalFile(dest / name, response->body);
    if (!required) return OkStatus();
    if (response->status == 404) {
      return FailedPreconditionError("OnCreate file " + name + " not found under " +
                                     options.source_uri);
    }
    if (response->status == 401 || response->status == 403) {
      return FailedPreconditionError("Access denied to " + url + " (HTTP " +
                                     std::to_string(response->status) + ")");
    }
    return FailedPreconditionError("HTTP " + std::to_string(response->status) + " fetching " + url);
  };
  HPOD_RETURN_IF_ERROR(get(options.on_create, true));
  return get("provisioning_parameters.json", false);
}

}  // namespace

std::string XmlDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out.push_back('&');
      continue;
    }
    std::string_view entity = text.substr(i + 1, semi - i - 1);
    std::optional<unsigned long> code_point;
    if (entity == "amp") {
      out.push_back('&');
    } else if (entity == "lt") {
      out.push_back('<');
    } else if (entity == "gt") {
      out.push_back('>');
    } else if (entity == "quot") {
      out.push_back('"');
    } else if (entity == "apos") {
      out.push_back('\'');
    } else if (entity.size() > 1 && entity[0] == '#') {
      std::string digits(entity.substr(entity[1] == 'x' || entity[1] == 'X' ? 2 : 1));
      int base = digits.size() + 1 == entity.size() ? 10 : 16;
      char* end = nullptr;
      unsigned long v = std::strtoul(digits.c_str(), &end, base);
      if (!digits.empty() && end != nullptr && *end == '\0' && v <= 0x10FFFF) code_point = v;
      if (!code_point) {
        out.push_back('&');
        continue;
      }
      // UTF-8 encode.
      unsigned long c = *code_point;
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    } else {
      out.push_back('&');  // unknown entity: keep the text as is
      continue;
    }
    i = semi;
  }
  return out;
}

StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos) {
    return InvalidArgumentError("not a ListBucketResult document");
  }
  ListObjectsPage page;
  size_t pos = 0;
  size_t next = 0;
  while (auto contents = FindElement(xml, "Contents", pos, &next)) {
    pos = next;
    auto key = FindElement(*contents, "Key", 0, nullptr);
    if (!key.has_value()) return InvalidArgumentError("Contents without Key");
    page.keys.push_back(XmlDecode(*key));
  }
  // IsTruncated and NextContinuationToken are top-level; Contents never holds them.
  if (auto truncated = FindElement(xml, "IsTruncated", 0, nullptr)) {
    page.is_truncated = (*truncated == "true");
  }
  if (auto token = FindElement(xml, "NextContinuationToken", 0, nullptr)) {
    page.next_continuation_token = XmlDecode(*token);
  }
  return page;
}

std::string ParseS3ErrorCode(std::string_view xml) {
  auto code = FindElement(xml, "Code", 0, nullptr);
  return code.has_value() ? XmlDecode(*code) : std::string();
}

StatusOr<std::string> RelativePathForKey(std::string_view key, std::string_view prefix) {
  if (key.substr(0, prefix.size()) != prefix) {
    return FailedPreconditionError("S3 returned key " + std::string(key) + " outside the prefix " +
                                   std::string(prefix));
  }
  std::string_view rest = key.substr(prefix.size());
  if (rest.empty() || rest.back() == '/') return std::string();
  std::string out;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view part = rest.substr(start, end - start);
    if (part == "..") {
      return FailedPreconditionError("Refusing object key " + std::string(key) +
                                     ": it would escape the lifecycle directory");
    }
    if (!part.empty() && part != ".") {
      if (!out.empty()) out.push_back('/');
      out.append(part);
    }
    start = end + 1;
  }
  return out;
}

Status FetchSource(const FetchOptions& options, const std::string& dest_dir, const Clock& clock) {
  fs::path dest(dest_dir);
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return InternalError("creating " + dest_dir + ": " + ec.message());
  const std::string& uri = options.source_uri;
  auto on_create = RelativePathForKey(options.on_create, "");
  if (!on_create.ok() || on_create->empty()) {
    return FailedPreconditionError("Invalid OnCreate file name " + options.on_create);
  }
  if (uri.rfind("s3://", 0) == 0) {
    HPOD_RETURN_IF_ERROR(FetchS3(options, dest, clock));
  } else if (uri.rfind("file://", 0) == 0) {
    HPOD_RETURN_IF_ERROR(FetchFile(options, dest));
  } else if (uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0) {
    HPOD_RETURN_IF_ERROR(FetchHttp(options, dest));
  } else {
    return FailedPreconditionError("Unsupported lifecycle source " + uri +
                                   " (use s3://, file:// or https://)");
  }
  if (!fs::is_regular_file(dest / *on_create, ec)) {
    return FailedPreconditionError("OnCreate file " + options.on_create + " not found under " +
                                   uri);
  }
  return OkStatus();
}

}  // namespace hpod::agent
