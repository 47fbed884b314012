#include "hpod/api/agent_protocol_training.h"

#include <array>
#include <utility>

#include "hpod/api/agent_protocol_reader.h"

namespace hpod::api::agentproto {
namespace {

using internal::Ctx;
using internal::Json;
using internal::Reader;
using internal::Typed;

StatusOr<TrainingRun> ParseRun(const Json& j, Ctx ctx) {
  Reader r(j, std::move(ctx));
  TrainingRun run;
  r.Str("path", &run.path, true);
  r.OneOf("kind", &run.kind, {"tensorboard", "jsonl"}, true);
  r.Num("last_modified", &run.last_modified);
  r.Int("size_bytes", &run.size_bytes);
  return r.Done(std::move(run));
}

StatusOr<TrainingPoint> ParsePoint(const Json& j, Ctx ctx) {
  Reader r(j, std::move(ctx));
  TrainingPoint p;
  r.Int("step", &p.step, true);
  r.Num("wall_time", &p.wall_time);
  r.Num("value", &p.value, true);
  return r.Done(p);
}

// `key` of `j`, an optional array of objects each read by `parse` with the path
// "key[i]." (absent or null: `out` stays empty).
template <typename T, typename Parse>
Status ReadList(const Json& j, const Ctx& ctx, const char* key, Parse parse, std::vector<T>* out) {
  auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || it->is_null()) return OkStatus();
  if (!it->is_array()) {
    return InvalidArgumentError(std::string(ctx.what) + ": field '" + ctx.prefix + key +
                                "' must be an array");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    HPOD_ASSIGN_OR_RETURN(
        T value, parse((*it)[i], Ctx{ctx.what, ctx.prefix + key + "[" + std::to_string(i) + "]."}));
    out->push_back(std::move(value));
  }
  return OkStatus();
}

StatusOr<TrainingSeries> ParseSeries(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  TrainingSeries s;
  r.Str("tag", &s.tag, true);
  HPOD_RETURN_IF_ERROR(r.status());
  HPOD_RETURN_IF_ERROR(ReadList(j, ctx, "points", ParsePoint, &s.points));
  return s;
}

template <typename T>
Json ListJson(const std::vector<T>& values) {
  Json list = Json::array();
  for (const T& v : values) list.push_back(v.ToJson());
  return list;
}

}  // namespace

StatusOr<TrainingRun> TrainingRun::FromJson(const Json& j) {
  return ParseRun(j, {"training run", ""});
}
Json TrainingRun::ToJson() const {
  return Json{
      {"path", path}, {"kind", kind}, {"last_modified", last_modified}, {"size_bytes", size_bytes}};
}

StatusOr<TrainingPoint> TrainingPoint::FromJson(const Json& j) {
  return ParsePoint(j, {"training point", ""});
}
Json TrainingPoint::ToJson() const {
  return Json{{"step", step}, {"wall_time", wall_time}, {"value", value}};
}

StatusOr<TrainingSeries> TrainingSeries::FromJson(const Json& j) {
  return ParseSeries(j, {"training series", ""});
}
Json TrainingSeries::ToJson() const { return Json{{"tag", tag}, {"points", ListJson(points)}}; }

StatusOr<TrainingQuery> TrainingQuery::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  TrainingQuery q;
  r.Str("id", &q.id, true);
  r.OneOf("op", &q.op, {kListRuns, kReadRun}, true);
  r.Str("path", &q.path);
  r.Int("max_points", &q.max_points);
  if (r.status().ok() && q.max_points < 0) r.Fail("max_points", "must be >= 0");
  if (r.status().ok() && q.op == kReadRun && q.path.empty()) {
    r.Fail("path", "is missing (op read_run reads one run)");
  }
  return r.Done(std::move(q));
}
Json TrainingQuery::ToJson() const {
  Json j{{"id", id}, {"op", op}};
  if (!path.empty()) j["path"] = path;
  if (max_points != 0) j["max_points"] = max_points;
  return Typed(kType, std::move(j));
}

StatusOr<TrainingResult> TrainingResult::FromJson(const Json& j) {
  const Ctx ctx{kType, ""};
  Reader r(j, ctx);
  r.Type(kType);
  TrainingResult t;
  r.Str("id", &t.id, true);
  r.Bool("ok", &t.ok, true);
  r.Str("code", &t.code);
  r.Str("error", &t.error);
  r.StrList("warnings", &t.warnings);
  HPOD_RETURN_IF_ERROR(r.status());
  HPOD_RETURN_IF_ERROR(ReadList(j, ctx, "runs", ParseRun, &t.runs));
  HPOD_RETURN_IF_ERROR(ReadList(j, ctx, "series", ParseSeries, &t.series));
  return t;
}
Json TrainingResult::ToJson() const {
  Json j{{"id", id}, {"ok", ok}};
  if (!ok) {
    j["code"] = code;
    j["error"] = error;
  }
  if (!runs.empty()) j["runs"] = ListJson(runs);
  if (!series.empty()) j["series"] = ListJson(series);
  if (!warnings.empty()) j["warnings"] = warnings;
  return Typed(kType, std::move(j));
}

Status TrainingResult::ToStatus() const {
  if (ok) return OkStatus();
  // The codes by their names (StatusCodeName); kOk is not an error's code.
  static constexpr std::array kCodes = {
      StatusCode::kCancelled,         StatusCode::kInvalidArgument,
      StatusCode::kDeadlineExceeded,  StatusCode::kNotFound,
      StatusCode::kAlreadyExists,     StatusCode::kPermissionDenied,
      StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition,
      StatusCode::kAborted,           StatusCode::kOutOfRange,
      StatusCode::kUnimplemented,     StatusCode::kInternal,
      StatusCode::kUnavailable,       StatusCode::kDataLoss,
      StatusCode::kUnauthenticated};
  for (StatusCode c : kCodes) {
    if (StatusCodeName(c) == code) return Status(c, error);
  }
  return InternalError(error.empty() ? "the agent failed without a message" : error);
}

TrainingResult TrainingResult::Failed(std::string id, const Status& status) {
  TrainingResult t;
  t.id = std::move(id);
  t.ok = false;
  t.code = std::string(StatusCodeName(status.code()));
  t.error = status.message();
  return t;
}

}  // namespace hpod::api::agentproto
