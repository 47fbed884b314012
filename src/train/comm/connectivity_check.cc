#include "hpod/train/comm/connectivity_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "hpod/base/subprocess.h"

namespace hpod::train::comm {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

std::string Gbit(double bps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f Gbit/s", bps / 1e9);
  return buf;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One iperf3 client run; the server may still be starting, so a refused
// connection is tried again, for up to 30 s: on a loaded machine (a CI run with
// two jobs, a busy node) iperf3's server took more than 5 s to listen.
LinkMeasure MeasureLink(int from, int to, const std::string& own, const std::string& peer,
                        const ConnectivityOptions& o) {
  LinkMeasure m{from, to, 0, ""};
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    SubprocessOptions run;
    run.argv = {"iperf3",
                "-c",
                peer,
                "-p",
                std::to_string(o.iperf_port + to),
                "-B",
                own,
                "-t",
                std::to_string(o.iperf_seconds),
                "-J"};
    run.timeout = std::chrono::seconds(o.iperf_seconds + 20);
    auto r = RunCommand(run);
    if (!r.ok()) {
      m.error = "cannot run iperf3 (install Debian's iperf3 package): " + r.status().message();
      return m;
    }
    // iperf3 -J reports a failure (the server not listening yet, or busy) as an
    // "error" beside an empty "end".
    json j = json::parse(r->stdout_data, nullptr, false);
    const double bps =
        j.is_object() && !j.contains("error") && j.contains("end")
            ? j["end"].value("sum_received", json::object()).value("bits_per_second", 0.0)
            : 0.0;
    if (bps > 0) {
      m.bits_per_second = bps;
      m.error.clear();
      return m;
    }
    m.error = j.is_object() && j.contains("error") && j["error"].is_string()
                  ? j["error"].get<std::string>()
                  : "iperf3 measured nothing (exit code " + std::to_string(r->exit_code) + ")";
    if (Clock::now() > deadline) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

std::vector<std::pair<int, int>> RingLinks(int n) {
  std::vector<std::pair<int, int>> out;
  if (n < 2) return out;
  for (int i = 0; i < n; ++i) out.emplace_back(i, (i + 1) % n);
  for (int i = 0; i < n; ++i) {
    std::pair<int, int> back{i, (i + n - 1) % n};
    if (std::find(out.begin(), out.end(), back) == out.end()) out.push_back(back);
  }
  return out;
}

ConnectivityVerdict JudgeConnectivity(const std::vector<std::string>& names,
                                      const std::vector<LinkMeasure>& links, double busbw,
                                      double latency_ms, const ConnectivityOptions& o) {
  const int n = static_cast<int>(names.size());
  ConnectivityVerdict v;
  v.failures.assign(n, "");
  double best = 0;
  std::vector<double> rates;
  for (const auto& l : links) {
    best = std::max(best, l.bits_per_second);
    rates.push_back(l.bits_per_second);
  }
  const double median = Median(rates);
  json jl = json::array();
  std::vector<int> out_links(n, 0), slow_out(n, 0);
  std::vector<std::string> why(n);
  for (const auto& l : links) {
    const bool slow = l.bits_per_second < o.min_link_ratio * best;
    jl.push_back({{"from", names[l.from]},
                  {"to", names[l.to]},
                  {"bits_per_second", l.bits_per_second},
                  {"slow", slow}});
    if (!l.error.empty()) jl.back()["error"] = l.error;
    ++out_links[l.from];
    if (!slow) continue;
    ++slow_out[l.from];
    if (!why[l.from].empty()) why[l.from] += ", ";
    why[l.from] += "to " + names[l.to] + " " +
                   (l.error.empty() ? Gbit(l.bits_per_second) : "unmeasured (" + l.error + ")");
  }
  bool blamed = false;
  for (int r = 0; r < n; ++r) {
    if (out_links[r] == 0 || slow_out[r] < out_links[r]) continue;
    char ratio[64];
    std::snprintf(ratio, sizeof(ratio), "below %.0f%% of the best link, %s", 100 * o.min_link_ratio,
                  Gbit(best).c_str());
    v.failures[r] =
        "every link out of " + names[r] + " is slow (iperf3 " + why[r] + "; " + ratio + ")";
    blamed = true;
  }
  // The collectives judged against the links they run on: when no link explains
  // a slow allreduce, every checked node fails with it.
  std::string collective;
  if (n >= 2 && busbw < o.min_busbw_ratio * median) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "allreduce bus bandwidth %s is %.3f of the median iperf3 link (%s), below %.3f",
                  Gbit(busbw).c_str(), median > 0 ? busbw / median : 0.0, Gbit(median).c_str(),
                  o.min_busbw_ratio);
    collective = buf;
  } else if (n >= 2 && latency_ms > o.max_latency_ms) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "4-byte allreduce latency %.2f ms is above %.0f ms", latency_ms,
                  o.max_latency_ms);
    collective = buf;
  }
  if (!collective.empty() && !blamed) {
    for (int r = 0; r < n; ++r) v.failures[r] = collective;
  }
  char sum[256];
  std::snprintf(sum, sizeof(sum),
                "%d nodes, every pair connected; %zu iperf3 links from %s to %s (median %s); "
                "allreduce bus bandwidth %s (%.2f of the median link), 4-byte latency %.3f ms",
                n, links.size(),
                Gbit(rates.empty() ? 0 : *std::min_element(rates.begin(), rates.end())).c_str(),
                Gbit(best).c_str(), Gbit(median).c_str(), Gbit(busbw).c_str(),
                median > 0 ? busbw / median : 0.0, latency_ms);
  v.summary = sum;
  if (!collective.empty()) v.summary += "; " + collective;
  v.detail = {{"nodes", names},
              {"links", jl},
              {"allreduce_bus_bits_per_second", busbw},
              {"allreduce_latency_ms", latency_ms},
              {"min_link_ratio", o.min_link_ratio},
              {"min_busbw_ratio", o.min_busbw_ratio},
              {"max_latency_ms", o.max_latency_ms},
              {"summary", v.summary},
              {"failures", v.failures}};
  return v;
}

StatusOr<ConnectivityVerdict> RunConnectivityCheck(JoinedWorld& w, const ConnectivityOptions& o) {
  Communicator& c = *w.comm;
  const int n = c.size();
  const int rank = c.rank();
  const std::string own = w.hostname.empty() ? "127.0.0.1" : w.hostname;
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> addrs, c.AllGatherBytes(own));
  std::vector<std::string> names = w.peer_names;
  if (static_cast<int>(o.names.size()) == n) names = o.names;
  if (static_cast<int>(names.size()) != n) names = addrs;

  std::vector<LinkMeasure> mine;
  if (n >= 2) {
    SubprocessOptions server;
    server.argv = {"iperf3", "-s", "-p", std::to_string(o.iperf_port + rank), "-B", own};
    server.output_file = "/dev/null";
    auto s = Subprocess::Start(server);
    if (!s.ok()) {
      return FailedPreconditionError("cannot start iperf3 (install Debian's iperf3 package): " +
                                     s.status().message());
    }
    HPOD_RETURN_IF_ERROR(c.Barrier());
    // One link at a time, so each measures its link alone.
    for (const auto& [from, to] : RingLinks(n)) {
      if (from == rank) mine.push_back(MeasureLink(from, to, own, addrs[to], o));
      HPOD_RETURN_IF_ERROR(c.Barrier());
    }
    (*s)->Kill();
    (*s)->Wait(std::chrono::seconds(5));
  }

  // Our collectives: bandwidth, then latency, each after a warm-up.
  const int64_t count = std::max<int64_t>(1, o.allreduce_bytes / 4);
  std::vector<float> data(count, 1.0f);
  double busbw = 0, latency_ms = 0;
  if (n >= 2) {
    HPOD_RETURN_IF_ERROR(c.AllReduceSum(data.data(), count));
    auto t0 = Clock::now();
    for (int i = 0; i < o.allreduce_iters; ++i) {
      HPOD_RETURN_IF_ERROR(c.AllReduceSum(data.data(), count));
    }
    const double secs =
        std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, o.allreduce_iters);
    busbw = secs > 0 ? 8.0 * count * 4 * 2.0 * (n - 1) / n / secs : 0;
    float one = 1;
    for (int i = 0; i < 3; ++i) HPOD_RETURN_IF_ERROR(c.AllReduceSum(&one, 1));
    std::vector<double> times;
    for (int i = 0; i < o.latency_iters; ++i) {
      auto t = Clock::now();
      HPOD_RETURN_IF_ERROR(c.AllReduceSum(&one, 1));
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
    latency_ms = Median(times);
  }

  json j = json::array();
  for (const auto& l : mine) {
    j.push_back({{"from", l.from}, {"to", l.to}, {"bps", l.bits_per_second}, {"error", l.error}});
  }
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> all, c.AllGatherBytes(j.dump()));
  if (rank != 0) return ConnectivityVerdict{};
  std::vector<LinkMeasure> links;
  for (const auto& text : all) {
    json part = json::parse(text, nullptr, false);
    if (!part.is_array()) return InternalError("a rank sent unreadable link measures");
    for (const auto& l : part) {
      links.push_back({l.value("from", 0), l.value("to", 0), l.value("bps", 0.0),
                       l.value("error", std::string())});
    }
  }
  return JudgeConnectivity(names, links, busbw, latency_ms, o);
}

}  // namespace hpod::train::comm
