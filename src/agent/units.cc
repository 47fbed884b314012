#include "hpod/agent/units.h"

#include <algorithm>

namespace hpod::agent {
namespace {

using Json = nlohmann::json;

constexpr std::pair<std::string_view, UnitVerb> kVerbs[] = {
    {"start", UnitVerb::kStart},   {"stop", UnitVerb::kStop},     {"restart", UnitVerb::kRestart},
    {"reload", UnitVerb::kReload}, {"enable", UnitVerb::kEnable}, {"disable", UnitVerb::kDisable},
    {"query", UnitVerb::kQuery},
};

std::string StringOr(const Json& j, const char* key, std::string fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

std::optional<std::string> CanonicalUnit(std::string_view name) {
  constexpr std::string_view kSuffix = ".service";
  if (name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix) {
    name.remove_suffix(kSuffix.size());
  }
  // Debian names sshd's unit ssh (sshd is its alias); MariaDB's answers to mysql
  // and mysqld too; munge's daemon is munged.
  if (name == "ssh") return "sshd";
  if (name == "mysql" || name == "mysqld" || name == "mariadbd") return "mariadb";
  if (name == "munged") return "munge";
  for (std::string_view known : kUnitNames) {
    if (name == known) return std::string(known);
  }
  return std::nullopt;
}

std::optional<UnitVerb> ParseUnitVerb(std::string_view verb) {
  for (const auto& [name, v] : kVerbs) {
    if (verb == name) return v;
  }
  return std::nullopt;
}

std::string_view UnitVerbName(UnitVerb verb) {
  for (const auto& [name, v] : kVerbs) {
    if (v == verb) return name;
  }
  return "query";
}

Json UnitRequest::ToJson() const {
  return Json{
      {"units_request",
       {{"verb", UnitVerbName(verb)}, {"units", units}, {"now", now}, {"wait_ms", wait_ms}}}};
}

StatusOr<UnitRequest> UnitRequest::FromJson(const Json& j) {
  auto body = j.is_object() ? j.find("units_request") : j.end();
  if (body == j.end() || !body->is_object()) {
    return InvalidArgumentError("units_request must be an object");
  }
  UnitRequest r;
  auto verb = ParseUnitVerb(StringOr(*body, "verb"));
  if (!verb)
    return InvalidArgumentError("units_request.verb '" + StringOr(*body, "verb") +
                                "' is not start, stop, restart, reload, enable, disable or query");
  r.verb = *verb;
  auto units = body->find("units");
  if (units != body->end() && !units->is_array()) {
    return InvalidArgumentError("units_request.units must be an array of strings");
  }
  if (units != body->end()) {
    for (const Json& u : *units) {
      if (!u.is_string()) return InvalidArgumentError("units_request.units must be strings");
      auto name = CanonicalUnit(u.get<std::string>());
      // systemctl's own words, which scripts and users know.
      if (!name) return NotFoundError("Unit " + u.get<std::string>() + ".service not found.");
      if (std::find(r.units.begin(), r.units.end(), *name) == r.units.end()) {
        r.units.push_back(*name);
      }
    }
  }
  if (r.units.empty() && r.verb != UnitVerb::kQuery) {
    return InvalidArgumentError("Too few arguments.");
  }
  if (auto now = body->find("now"); now != body->end() && now->is_boolean()) r.now = *now;
  if (auto wait = body->find("wait_ms"); wait != body->end() && wait->is_number_integer()) {
    r.wait_ms = std::clamp<int64_t>(wait->get<int64_t>(), 0, 600000);
  }
  return r;
}

Json UnitState::ToJson() const {
  return Json{{"name", name},      {"description", description}, {"active", active},
              {"sub", sub},        {"enabled", enabled},         {"pid", pid},
              {"since", since},    {"message", message},         {"logs", logs},
              {"stopped", stopped}};
}

StatusOr<UnitState> UnitState::FromJson(const Json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    return InvalidArgumentError("a unit's state must be an object with a name");
  }
  UnitState s;
  s.name = StringOr(j, "name");
  s.description = StringOr(j, "description");
  s.active = StringOr(j, "active", "inactive");
  s.sub = StringOr(j, "sub", "dead");
  s.message = StringOr(j, "message");
  if (auto it = j.find("enabled"); it != j.end() && it->is_boolean()) s.enabled = *it;
  if (auto it = j.find("stopped"); it != j.end() && it->is_boolean()) s.stopped = *it;
  if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) s.pid = *it;
  if (auto it = j.find("since"); it != j.end() && it->is_number()) s.since = *it;
  if (auto it = j.find("logs"); it != j.end() && it->is_array()) {
    for (const Json& l : *it) {
      if (l.is_string()) s.logs.push_back(l.get<std::string>());
    }
  }
  return s;
}

Json UnitsAnswer(const std::vector<UnitState>& units) {
  Json list = Json::array();
  for (const UnitState& u : units) list.push_back(u.ToJson());
  return Json{{"units", list}};
}

}  // namespace hpod::agent
