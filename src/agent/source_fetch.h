#pragma once

// Fetches a lifecycle configuration's source (SageMaker's SourceS3Uri) into a local
// directory, as HyperPod downloads the whole prefix to
// /tmp/sagemaker-lifecycle-<id>/src/ before running OnCreate.
//
// Supported sources:
//   s3://bucket/prefix/   every object under the prefix (ListObjectsV2 with
//                         continuation tokens + GetObject), path-style requests to
//                         S3Access::endpoint signed with SigV4 (service "s3").
//   file:///dir/          recursive copy of a local directory, modes kept.
//   http(s)://host/path/  a prefix without a listing: only <prefix><on_create> and,
//                         when present, <prefix>provisioning_parameters.json are
//                         fetched (plain HTTP has no way to list a prefix, so scripts
//                         that use helper files must come from s3:// or file://).
//
// Every failure a user can fix is kFailedPrecondition whose message is the exact
// text PROTOCOL.md shows the user (e.g. "No objects found under s3://b/p/").
//
// Limitation: auth::SignRequest canonicalises paths as non-S3 services do (the path
// is encoded once more), so object keys must use only unreserved characters and '/'
// for the signature to match a real S3; others are fetched from hpod's own fake S3.
//
// Thread contract: free functions; safe to call from any thread.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"

namespace hpod::agent {

// Appended to "No objects found under file://...": a file:// source is read on
// the node itself, and a local node has its
// own /tmp, /run, /var/log, /var/spool and /fsx, so a host directory there (or
// one removed since CreateCluster checked it) is not found.
inline constexpr char kFileSourceHint[] =
    "(file:// sources are read on the node itself; a local hpod node has its own /tmp, /run, "
    "/var/log, /var/spool and /fsx, not the host's: put the lifecycle scripts in a directory "
    "the nodes share with the host, e.g. under /var/tmp or /srv, or use an s3:// source)";

struct S3Access {
  std::string endpoint;  // "http://127.0.0.1:8080" (path-style: <endpoint>/<bucket>/<key>)
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  // Reach the endpoint through this Unix socket (hpodd's S3 relay for local nodes,
  // which have no route off their cluster network); the URL still names the
  // endpoint, so Host and the signature are those of the real endpoint.
  std::string unix_socket;
};

struct FetchOptions {
  std::string source_uri;  // s3://, file://, http(s)://
  std::string on_create;   // file name relative to the prefix; must exist after the fetch
  std::optional<S3Access> s3;
  std::chrono::milliseconds request_timeout{60000};
  std::chrono::milliseconds connect_timeout{5000};
};

// Fetches into `dest_dir` (created if missing) and checks that `on_create` exists
// there. Refuses keys that would escape `dest_dir` ("..", absolute).
Status FetchSource(const FetchOptions& options, const std::string& dest_dir, const Clock& clock);

// One page of a ListObjectsV2 answer.
struct ListObjectsPage {
  std::vector<std::string> keys;
  bool is_truncated = false;
  std::string next_continuation_token;
};

// Parses a ListObjectsV2 XML body (only Contents/Key, IsTruncated and
// NextContinuationToken; entities decoded). kInvalidArgument when it is not one.
StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view xml);

// The text of the first <Code> element of an S3 error body ("" when none).
std::string ParseS3ErrorCode(std::string_view xml);

// Decodes &amp; &lt; &gt; &quot; &apos; and numeric (&#NN; &#xHH;) references.
std::string XmlDecode(std::string_view text);

// The local relative path for a key below `prefix`, or an error for keys that would
// escape the destination ("..", empty) — "" for directory markers ("dir/").
StatusOr<std::string> RelativePathForKey(std::string_view key, std::string_view prefix);

}  // namespace hpod::agent
