// The pool host channel's frames (agent_protocol.h: HostAssign, HostStatus,
// HostReboot, HostFault and SharedFilesystem), as the rest of the protocol.

#include <utility>

#include "hpod/api/agent_protocol.h"
#include "hpod/api/agent_protocol_reader.h"

namespace hpod::api::agentproto {
namespace {

using internal::Ctx;
using internal::Json;
using internal::Reader;
using internal::Typed;

StatusOr<SharedFilesystem> ParseSharedFilesystem(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  SharedFilesystem f;
  r.Str("fs_type", &f.type, true);
  r.Str("source", &f.source);
  r.Str("options", &f.options);
  r.Str("marker_name", &f.marker_name, true);
  r.Str("marker_value", &f.marker_value, true);
  r.Bool("writer", &f.writer);
  return r.Done(std::move(f));
}

}  // namespace

StatusOr<SharedFilesystem> SharedFilesystem::FromJson(const Json& j) {
  return ParseSharedFilesystem(j, {"shared_fs", ""});
}
Json SharedFilesystem::ToJson() const {
  return Json{{"fs_type", type},
              {"source", source},
              {"options", options},
              {"marker_name", marker_name},
              {"marker_value", marker_value},
              {"writer", writer}};
}

StatusOr<HostAssign> HostAssign::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  HostAssign a;
  r.Str("instance_id", &a.instance_id, true);
  r.Obj("shared_fs", &a.shared_fs, ParseSharedFilesystem);
  return r.Done(std::move(a));
}
Json HostAssign::ToJson() const {
  return Typed(kType, Json{{"instance_id", instance_id},
                           {"shared_fs", shared_fs ? shared_fs->ToJson() : Json(nullptr)}});
}

StatusOr<HostStatus> HostStatus::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  HostStatus h;
  r.Str("instance_id", &h.instance_id, true);
  r.Str("message", &h.message);
  r.Bool("running", &h.running);
  r.Bool("check_failed", &h.check_failed);
  r.Bool("leaving", &h.leaving);
  return r.Done(std::move(h));
}
Json HostStatus::ToJson() const {
  return Typed(kType, Json{{"instance_id", instance_id},
                           {"message", message},
                           {"running", running},
                           {"check_failed", check_failed},
                           {"leaving", leaving}});
}

StatusOr<HostReboot> HostReboot::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  HostReboot h;
  r.Str("request_id", &h.request_id, true);
  return r.Done(std::move(h));
}
Json HostReboot::ToJson() const { return Typed(kType, Json{{"request_id", request_id}}); }

StatusOr<HostFault> HostFault::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  HostFault f;
  r.Str("kind", &f.kind, true);
  r.Int("seconds", &f.seconds);
  return r.Done(std::move(f));
}
Json HostFault::ToJson() const { return Typed(kType, Json{{"kind", kind}, {"seconds", seconds}}); }

}  // namespace hpod::api::agentproto
