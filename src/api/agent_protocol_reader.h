#pragma once

// The agent protocol's JSON reading helpers, shared by the files that define the
// protocol's structs (agent_protocol.cc, agent_protocol_host.cc, ...). Private to
// src/api: nothing outside this folder includes it.
//
// Thread contract: a Reader is used by one thread, for one object.

#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::api::agentproto {

struct HostStats;

namespace internal {

using Json = nlohmann::json;

// Where a value sits, for error messages: the message type and the path of the
// object being read ("" at the top, "lifecycle.s3." inside nested objects).
struct Ctx {
  std::string_view what;
  std::string prefix;
};

// Reads the fields of one JSON object, keeping the first error.
class Reader {
 public:
  Reader(const Json& j, Ctx ctx) : j_(j), ctx_(std::move(ctx)) {
    if (!j_.is_object()) {
      status_ = InvalidArgumentError(
          std::string(ctx_.what) + ": " +
          (ctx_.prefix.empty() ? std::string("not a JSON object")
                               : "field '" + ctx_.prefix.substr(0, ctx_.prefix.size() - 1) +
                                     "' must be an object"));
    }
  }

  const Status& status() const { return status_; }
  Ctx Nested(const std::string& key) const { return {ctx_.what, ctx_.prefix + key + "."}; }

  void Type(std::string_view type) {
    const Json* v = Find("type");
    if (v != nullptr && (!v->is_string() || v->get<std::string>() != type)) {
      Fail("type", "must be \"" + std::string(type) + "\"");
    }
  }
  void Str(const char* key, std::string* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_string()) return Fail(key, "must be a string");
      *out = v->get<std::string>();
    }
  }
  void Int(const char* key, int64_t* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_number_integer()) return Fail(key, "must be an integer");
      *out = v->get<int64_t>();
    }
  }
  void Num(const char* key, double* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_number()) return Fail(key, "must be a number");
      *out = v->get<double>();
    }
  }
  void Num(const char* key, std::optional<double>* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_number()) return Fail(key, "must be a number");
      *out = v->get<double>();
    }
  }
  // A string that must be one of `allowed` (a closed enum of the wire).
  void OneOf(const char* key, std::string* out, std::initializer_list<std::string_view> allowed,
             bool required = false) {
    const bool had = status_.ok();
    Str(key, out, required);
    if (!had || !status_.ok() || Find(key) == nullptr) return;
    std::string list;
    for (std::string_view a : allowed) {
      if (*out == a) return;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    Fail(key, "must be one of " + list + " (not '" + *out + "')");
  }
  void Bool(const char* key, bool* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_boolean()) return Fail(key, "must be a boolean");
      *out = v->get<bool>();
    }
  }
  void StrList(const char* key, std::vector<std::string>* out, bool required = false) {
    const Json* v = Get(key, required);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "must be an array of strings");
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        return Fail(std::string(key) + "[" + std::to_string(i) + "]", "must be a string");
      }
      out->push_back((*v)[i].get<std::string>());
    }
  }
  void StrMap(const char* key, std::map<std::string, std::string>* out, bool required = false) {
    const Json* v = Get(key, required);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "must be an object of strings");
    out->clear();
    for (const auto& [name, value] : v->items()) {
      if (!value.is_string()) return Fail(std::string(key) + "." + name, "must be a string");
      (*out)[name] = value.get<std::string>();
    }
  }
  void Any(const char* key, Json* out) {
    if (auto it = j_.find(key); it != j_.end()) *out = *it;
  }
  // A nested object, read by `parse(json, ctx)`.
  template <typename T, typename Parse>
  void Obj(const char* key, std::optional<T>* out, Parse parse, bool required = false) {
    const Json* v = Get(key, required);
    if (v == nullptr) return;
    StatusOr<T> parsed = parse(*v, Nested(key));
    if (!parsed.ok()) {
      if (status_.ok()) status_ = parsed.status();
      return;
    }
    *out = std::move(*parsed);
  }
  template <typename T>
  StatusOr<T> Done(T value) const {
    if (!status_.ok()) return status_;
    return value;
  }
  void Fail(const std::string& key, const std::string& problem) {
    if (!status_.ok()) return;
    status_ = InvalidArgumentError(std::string(ctx_.what) + ": field '" + ctx_.prefix + key + "' " +
                                   problem);
  }

 private:
  const Json* Find(const char* key) const {
    if (!j_.is_object()) return nullptr;
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  // The value of `key`, or nullptr when absent (an error when required).
  const Json* Get(const char* key, bool required) {
    if (!status_.ok()) return nullptr;
    const Json* v = Find(key);
    if (v == nullptr && required) Fail(key, "is missing");
    return v;
  }

  const Json& j_;
  const Ctx ctx_;
  Status status_;
};

inline Json Typed(std::string_view type, Json body = Json::object()) {
  body["type"] = std::string(type);
  return body;
}

// Nested objects defined in their own files, read with the caller's context so
// errors name the full path ("heartbeat: field 'host.memory_total_bytes' ...").
StatusOr<HostStats> ParseHostStats(const Json& j, Ctx ctx);  // agent_protocol_host.cc

}  // namespace internal
}  // namespace hpod::api::agentproto
