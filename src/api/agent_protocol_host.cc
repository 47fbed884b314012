#include "hpod/api/agent_protocol_host.h"

#include <utility>

#include "hpod/api/agent_protocol_reader.h"

namespace hpod::api::agentproto {
namespace {

using internal::Ctx;
using internal::Json;
using internal::Reader;

// Figures are non-negative by nature; a negative one is a broken sampler, and
// Prometheus would take a counter going negative for a reset.
void NonNegative(Reader& r, const char* key, double v) {
  if (r.status().ok() && v < 0) r.Fail(key, "must not be negative");
}

StatusOr<HostCpuSeconds> ParseCpu(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  HostCpuSeconds c;
  const std::pair<const char*, double*> fields[] = {
      {"user", &c.user},     {"nice", &c.nice}, {"system", &c.system},   {"idle", &c.idle},
      {"iowait", &c.iowait}, {"irq", &c.irq},   {"softirq", &c.softirq}, {"steal", &c.steal}};
  for (const auto& [key, out] : fields) {
    r.Num(key, out);
    NonNegative(r, key, *out);
  }
  return r.Done(std::move(c));
}

StatusOr<HostFilesystem> ParseFilesystem(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  HostFilesystem f;
  r.Str("mountpoint", &f.mountpoint, true);
  r.Int("size_bytes", &f.size_bytes);
  r.Int("avail_bytes", &f.avail_bytes);
  NonNegative(r, "size_bytes", static_cast<double>(f.size_bytes));
  NonNegative(r, "avail_bytes", static_cast<double>(f.avail_bytes));
  return r.Done(std::move(f));
}

}  // namespace

namespace internal {

StatusOr<HostStats> ParseHostStats(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  HostStats h;
  std::optional<HostCpuSeconds> cpu;
  r.Obj("cpu_seconds", &cpu, ParseCpu);
  if (cpu) h.cpu_seconds = *cpu;
  r.Int("memory_total_bytes", &h.memory_total_bytes);
  r.Int("memory_available_bytes", &h.memory_available_bytes);
  NonNegative(r, "memory_total_bytes", static_cast<double>(h.memory_total_bytes));
  NonNegative(r, "memory_available_bytes", static_cast<double>(h.memory_available_bytes));
  if (!r.status().ok()) return r.status();
  auto it = j.find("filesystems");
  if (it == j.end() || it->is_null()) return h;
  if (!it->is_array()) {
    r.Fail("filesystems", "must be an array");
    return r.status();
  }
  for (size_t i = 0; i < it->size(); ++i) {
    HPOD_ASSIGN_OR_RETURN(HostFilesystem f,
                          ParseFilesystem((*it)[i], {ctx.what, ctx.prefix + "filesystems[" +
                                                                   std::to_string(i) + "]."}));
    bool seen = false;
    for (const auto& kept : h.filesystems) seen = seen || kept.mountpoint == f.mountpoint;
    if (IsHostMountpoint(f.mountpoint) && !seen) h.filesystems.push_back(std::move(f));
  }
  return h;
}

}  // namespace internal

bool IsHostMountpoint(std::string_view mountpoint) {
  for (std::string_view m : kHostMountpoints) {
    if (m == mountpoint) return true;
  }
  return false;
}

StatusOr<HostCpuSeconds> HostCpuSeconds::FromJson(const Json& j) {
  return ParseCpu(j, {"cpu_seconds", ""});
}
Json HostCpuSeconds::ToJson() const {
  return Json{{"user", user},     {"nice", nice}, {"system", system},   {"idle", idle},
              {"iowait", iowait}, {"irq", irq},   {"softirq", softirq}, {"steal", steal}};
}

StatusOr<HostFilesystem> HostFilesystem::FromJson(const Json& j) {
  return ParseFilesystem(j, {"filesystem", ""});
}
Json HostFilesystem::ToJson() const {
  return Json{{"mountpoint", mountpoint}, {"size_bytes", size_bytes}, {"avail_bytes", avail_bytes}};
}

StatusOr<HostStats> HostStats::FromJson(const Json& j) {
  return internal::ParseHostStats(j, {"host", ""});
}
Json HostStats::ToJson() const {
  Json list = Json::array();
  for (const auto& f : filesystems) list.push_back(f.ToJson());
  return Json{{"cpu_seconds", cpu_seconds.ToJson()},
              {"memory_total_bytes", memory_total_bytes},
              {"memory_available_bytes", memory_available_bytes},
              {"filesystems", std::move(list)}};
}

}  // namespace hpod::api::agentproto
