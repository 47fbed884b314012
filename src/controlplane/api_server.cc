#include "hpod/controlplane/api_server.h"

#include <spdlog/spdlog.h>

#include "hpod/api/codec.h"
#include "hpod/api/errors.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/recovery_api.h"

namespace hpod::controlplane {
namespace {

http::Response JsonResponse(int status, std::string body, const std::string& request_id) {
  http::Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "application/x-amz-json-1.1"});
  r.headers.push_back({"x-amzn-RequestId", request_id});
  r.body = std::move(body);
  return r;
}

http::Response ErrorResponse(const Status& s, const std::string& request_id,
                             const std::string& op) {
  api::ApiError e = api::ToApiError(s);
  if (e.http_status >= 500) {
    spdlog::error("request {} {} failed: {}", request_id, op, s.ToString());
  } else {
    spdlog::info("request {} {} -> {}: {}", request_id, op, e.type, e.message);
  }
  http::Response r = JsonResponse(e.http_status, api::ErrorBody(e), request_id);
  // botocore reads the error code from this header when the body lacks one.
  r.headers.push_back({"x-amzn-ErrorType", e.type});
  return r;
}

// The first query parameter that is not part of a presigned signature.
std::string FirstOperationQueryParam(std::string_view query) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    std::string_view key = pair.substr(0, pair.find('='));
    if (!key.empty() && key.rfind("X-Amz-", 0) != 0) return std::string(key);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace

std::optional<store::AccessKeyRecord> ApiServer::KeyCache::Find(
    std::string_view access_key_id, std::chrono::steady_clock::time_point now) const {
  MutexLock lock(mu_);
  auto it = keys_.find(access_key_id);
  if (it == keys_.end() || now - it->second.read >= kTtl || now < it->second.read) {
    return std::nullopt;
  }
  return it->second.key;
}

void ApiServer::KeyCache::Put(const store::AccessKeyRecord& key,
                              std::chrono::steady_clock::time_point now) {
  MutexLock lock(mu_);
  if (keys_.size() >= kMaxKeys) keys_.clear();
  keys_.insert_or_assign(key.access_key_id, Entry{key, now});
}

StatusOr<std::string> ApiServer::StoreSecrets::SecretFor(std::string_view access_key_id) const {
  const auto now = clock_.SteadyNow();
  found_ = cache_.Find(access_key_id, now);
  if (!found_) {
    HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(found_, tx.GetAccessKey(std::string(access_key_id)));
      return OkStatus();
    }));
    cache_.Put(*found_, now);
  }
  return found_->secret_access_key;
}

ApiServer::ApiServer(store::Store& store, ClusterApi& api, NodeApi& node_api, const Clock& clock,
                     ApiServerOptions options, Metrics* metrics)
    : store_(store),
      api_(api),
      node_api_(node_api),
      clock_(clock),
      options_(std::move(options)),
      responses_(options_.response_cache_bytes),
      metrics_(metrics) {}

StatusOr<ApiServer::Identity> ApiServer::Authenticate(const http::Request& request) {
  if (options_.insecure_no_auth) return Identity{store::Role::kAdmin, ""};
  auth::SignableRequest sr;
  sr.method = request.method;
  sr.target = request.target;
  for (const auto& h : request.headers) sr.headers.emplace_back(h.name, h.value);
  sr.body = request.body;
  auth::VerifyOptions vo;
  vo.service = "sagemaker";
  vo.region = options_.region;
  vo.max_skew = options_.max_clock_skew;
  vo.signing_keys = &signing_keys_;
  StoreSecrets secrets(store_, keys_, clock_);
  HPOD_ASSIGN_OR_RETURN(auth::VerifiedCaller caller,
                        auth::VerifyRequest(sr, secrets, vo, clock_.Now()));
  // hpod reads an operation's input from the body only. A body outside the
  // signature (presigned over UNSIGNED-PAYLOAD) could name any cluster, so it is
  // refused rather than acted on.
  if (!caller.body_signed && !request.body.empty() && request.body != "{}") {
    return UnauthenticatedError(
               "The request body is not covered by the signature (UNSIGNED-PAYLOAD); sign the "
               "body or use header authentication")
        .WithAwsType("InvalidSignatureException");
  }
  Identity who;
  who.access_key_id = caller.access_key_id;
  // A verified signature means the lookup found the key.
  if (!secrets.found()) return InternalError("verified a request without reading its key");
  who.role = secrets.found()->role;
  return who;
}

http::Response ApiServer::Handle(const http::Request& request) {
  const auto start = clock_.SteadyNow();
  http::Response response = Serve(request);
  if (metrics_ != nullptr) {
    metrics_->ObserveApiRequest(ApiOperationLabel(request), response.status,
                                std::chrono::duration<double>(clock_.SteadyNow() - start).count());
  }
  return response;
}

http::Response ApiServer::Serve(const http::Request& request) {
  const std::string request_id = NewEventId();
  std::string target(request.HeaderValue("X-Amz-Target"));
  if (request.method != "POST" || request.Path() != "/") {
    return ErrorResponse(
        InvalidArgumentError("hpod serves the SageMaker API as POST / (got " + request.method +
                             " " + std::string(request.Path()) + ")")
            .WithAwsType("UnknownOperationException"),
        request_id, target);
  }
  auto role = Authenticate(request);
  if (!role.ok()) return ErrorResponse(role.status(), request_id, target);

  // Parameters in the query string (as botocore's presigner puts them) would be
  // silently ignored: refuse them instead, naming the first one.
  if (auto bad = FirstOperationQueryParam(request.Query()); !bad.empty()) {
    return ErrorResponse(
        InvalidArgumentError("hpod reads operation parameters from the JSON body only; found "
                             "query parameter '" +
                             bad + "'"),
        request_id, target);
  }
  auto decoded = api::DecodeRequest(api::ServiceModel::Get(), target,
                                    request.HeaderValue("Content-Type"), request.body);
  if (!decoded.ok()) return ErrorResponse(decoded.status(), request_id, target);
  const std::string& op = decoded->operation->name;
  if (role->role != store::Role::kAdmin && !ClusterApi::IsReadOnly(op)) {
    return ErrorResponse(
        PermissionDeniedError("The access key is not authorized to perform: sagemaker:" + op +
                              " (its role is 'user', which may only read; use an admin key)")
            .WithAwsType("AccessDeniedException"),
        request_id, op);
  }
  // An answer of the store alone, read since the last write, is served again
  // (response_cache.h). The generation and the image are taken before the read.
  std::string cache_key, image;
  uint64_t generation = 0;
  if (options_.response_cache_bytes > 0 && ClusterApi::AnswersFromStoreOnly(op)) {
    generation = store_.WriteGeneration();
    image = api_.ShippedImage();
    // `replace`: never throws (the decoder let only valid UTF-8 through anyway).
    cache_key = op + '\n' + image + '\n' +
                decoded->input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::shared_ptr<const std::string> body = responses_.Find(cache_key, generation);
    if (metrics_ != nullptr) metrics_->CountApiCacheLookup(body != nullptr);
    if (body != nullptr) {
      spdlog::debug("request {} {} ok (cached)", request_id, op);
      return JsonResponse(200, *body, request_id);
    }
  }
  StatusOr<nlohmann::ordered_json> result = InternalError("not run");
  try {
    if (op == "HpodGetCallerIdentity") {
      // Who signed the request, so that a client (the web console) offers only
      // what the key's role may do. Every valid key may ask (IsReadOnly).
      result =
          nlohmann::ordered_json{{"AccessKeyId", role->access_key_id},
                                 {"Role", role->role == store::Role::kAdmin ? "admin" : "user"}};
    } else if (NodeApi::Handles(op)) {
      result = node_api_.Call(*decoded->operation, decoded->input,
                              Caller{role->access_key_id, std::string(request.HeaderValue("Host")),
                                     request.tls, role->role == store::Role::kAdmin});
    } else if (HostApi::Handles(op)) {
      if (hosts_ == nullptr) {
        result = InternalError("this API server was built without its host operations");
      } else {
        result = hosts_->Call(op, decoded->input);
      }
    } else if (RecoveryApiHandles(op)) {
      result = CallRecoveryApi(store_, op, decoded->input);
    } else {
      result = api_.Call(*decoded->operation, decoded->input);
      if (result.ok()) node_api_.AddNodeFacts(op, *result);
    }
  } catch (const std::exception& e) {
    // A handler defect must cost one request, not the daemon.
    result = InternalError(std::string("handler threw: ") + e.what());
  }
  if (!result.ok()) return ErrorResponse(result.status(), request_id, op);
  spdlog::debug("request {} {} ok", request_id, op);
  // Node logs may hold bytes that are not UTF-8; they are replaced, not fatal.
  std::string body = result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Kept only when the image did not change during the read: the key names it.
  if (!cache_key.empty() && api_.ShippedImage() == image) {
    responses_.Put(cache_key, generation, std::make_shared<const std::string>(body));
  }
  return JsonResponse(200, std::move(body), request_id);
}

}  // namespace hpod::controlplane
