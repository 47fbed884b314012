#pragma once

// hpodd's Prometheus metrics (GET /metrics, text format 0.0.4), on prometheus-cpp's
// core: a registry of what happens (API requests, reconcile passes, store
// transactions), counted where it happens, plus collectors that compute what is
// (clusters, nodes, recoveries, agents: metrics_state.h) from the store and the
// agents' in-memory state at scrape time, so the numbers can never drift from the
// store's.
//
// Conventions (dependencies.md §10; `promtool check metrics` passes on the
// output): names `hpod_*`, base units in names, counters end in `_total`, labels
// bounded — an operation the model does not know is "unknown", no request,
// recovery or job ids. Per-node series carry `node` = the node's instance id
// (stable for a machine, never reused: a replacement is a new series) and
// `hpod_node_info` maps it to the hostname.
//
// Thread contract: Metrics is thread-safe once its collectors are added
// (AddCollector before serving); Observe* may be called from any thread.

#include <prometheus/metric_family.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/http/message.h"
#include "hpod/store/store.h"

namespace prometheus {
class Registry;
}

namespace hpod::controlplane {

// A histogram's observations, bucketed: what a figure folded once and kept (the
// finished recoveries' durations, metrics_recoveries.h) holds instead of every
// value. Plain value; Add requires the same bounds.
struct HistogramCounts {
  explicit HistogramCounts(std::vector<double> bounds = {})
      : bounds(std::move(bounds)), counts(this->bounds.size() + 1, 0) {}
  void Observe(double value);
  void Add(const HistogramCounts& other);

  std::vector<double> bounds;    // upper bounds, increasing (+Inf is implied)
  std::vector<uint64_t> counts;  // per bucket, not cumulative; the last is above every bound
  double sum = 0;
};

// Builds the families of one scrape (collectors append to it) as text (format
// 0.0.4). Samples of one name accumulate into one family, in the order first
// seen; a collector that adds each family whole, one after the other, has its
// text written once, in place. Each sample is written as it is added, labels
// sorted by name and their values bounded (metrics_labels.h) and escaped: a
// scrape of 10,000 nodes is about 170,000 samples, and building a
// prometheus::ClientMetric (a map and strings) for each, then serializing them
// through an ostream, took 240 ms of the 50 ms a scrape may take (issue 30).
// Label names and values are views, read during the call only.
//
// Not thread-safe: one per scrape, filled by the scraping thread.
class Exposition {
 public:
  using Label = std::pair<std::string_view, std::string_view>;
  using Labels = std::vector<Label>;

  void Gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  void Counter(std::string_view name, std::string_view help, const Labels& labels, double value);
  // A histogram of `values` over `buckets` (upper bounds, increasing; +Inf added).
  void Histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const std::vector<double>& buckets, const std::vector<double>& values);
  void Histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const HistogramCounts& counts);
  // The fast path of a collector writing many samples of one family (the
  // per-node ones, nearly all of a large scrape's): the text the sample lines of
  // `name` go to, after its HELP and TYPE when the family is new. The caller
  // appends whole lines, `name{labels} value\n`, labels sorted by name, each
  // written by AppendLabel, the value by AppendValue; the reference is valid
  // until the next call on this Exposition. It saves Gauge's per-sample family
  // lookup and label sort, and lets labels shared by many samples be written once
  // and copied.
  std::string& Lines(std::string_view name, std::string_view help, const char* type) {
    return Samples(name, help, type);
  }
  // `name="value"`, the value bounded (metrics_labels.h) and escaped.
  static void AppendLabel(std::string& out, std::string_view name, std::string_view value);
  // As Prometheus reads it: the shortest text that reads back as the same double;
  // NaN and ±Inf by name.
  static void AppendValue(std::string& out, double value);
  // Families of another source (the registry), appended as they are.
  void Append(const std::vector<prometheus::MetricFamily>& families);
  // Room for `bytes` of text (the size of the last scrape), so the text is not
  // copied as it grows.
  void Reserve(size_t bytes) { text_.reserve(bytes); }

  // The text format (0.0.4): each family's HELP and TYPE, then its samples. The
  // rvalue form hands over the text without a copy when every family was added
  // whole before the next began.
  std::string Text() const&;
  std::string Text() &&;

 private:
  // A family's samples are written into `text_` while it is the newest family;
  // those added after another one began go to `more`, spliced in by Text().
  struct Family {
    std::string name;
    size_t begin = 0;                // where its HELP line starts in text_
    size_t end = std::string::npos;  // where its streamed part ends (npos: the newest)
    std::string more;
  };
  // Where samples of `name` go now, the family made (with `help`, `type`) when new.
  std::string& Samples(std::string_view name, std::string_view help, const char* type);
  // Starts family `name` at the end of text_ (the newest one ends there).
  void Start(std::string_view name);
  bool Spliced() const;

  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::string text_;
  std::vector<Family> families_;
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> index_;  // name → position
};

// Histogram bucket bounds, in seconds.
extern const std::vector<double> kApiLatencyBuckets;
extern const std::vector<double> kReconcileBuckets;
extern const std::vector<double> kStoreBuckets;

class Metrics {
 public:
  // `version` is hpod_build_info's.
  explicit Metrics(std::string version);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One API request (ApiServer::Handle): hpod_api_requests_total{operation,code}
  // and hpod_api_request_duration_seconds{operation}. `operation` must already be
  // bounded (ApiOperationLabel).
  void ObserveApiRequest(std::string_view operation, int http_status, double seconds);
  // One lookup in the API's response cache (response_cache.h):
  // hpod_api_response_cache_lookups_total{result="hit"|"miss"}.
  void CountApiCacheLookup(bool hit);
  // One reconcile pass of a concern ("cluster", "health"):
  // hpod_reconcile_duration_seconds{reconciler}, hpod_reconcile_errors_total.
  void ObserveReconcile(std::string_view reconciler, double seconds, bool failed);
  // One store transaction, `mode` "read" or "write":
  // hpod_store_transaction_duration_seconds{mode}.
  void ObserveStoreTransaction(std::string_view mode, double seconds);

  // A scrape-time source; it returns an error to fail the scrape (500), e.g. when
  // the store cannot be read, rather than serve a partial picture.
  using Collector = std::function<Status(Exposition& out)>;
  void AddCollector(Collector collector);

  // Every family: the registry's, hpod_build_info, then each collector's.
  StatusOr<std::string> Scrape() const;
  StatusOr<Exposition> Collect() const;

 private:
  struct Families;
  const std::string version_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  std::vector<Collector> collectors_;
  mutable std::atomic<size_t> last_size_{0};  // of the last scrape's text
};

// The `operation` label of an API request: the X-Amz-Target's operation when the
// service model knows it ("CreateCluster", "HpodListRecoveries"), else "unknown"
// (a client can send any header; the label set must stay bounded).
std::string ApiOperationLabel(const http::Request& request);

// A Store that times every transaction into `metrics` and forwards it to `inner`.
// Every component of hpodd reaches the store through it, so it is the one place
// transactions are measured. Thread contract: as the inner store's.
class TimedStore final : public store::Store {
 public:
  TimedStore(std::unique_ptr<store::Store> inner, Metrics& metrics, const Clock& clock);
  Status Write(const std::function<Status(store::WriteTx&)>& fn) override;
  Status Read(const std::function<Status(store::ReadTx&)>& fn) override;
  uint64_t WriteGeneration() const override { return inner_->WriteGeneration(); }
  int SchemaVersion() override { return inner_->SchemaVersion(); }

 private:
  const std::unique_ptr<store::Store> inner_;
  Metrics& metrics_;
  const Clock& clock_;
};

// ---- The /metrics route's bearer token ----

// <data_dir>/metrics-token: the token Prometheus presents as
// `Authorization: Bearer <token>` (prometheus.yml: authorization.credentials_file
// pointed at this file).
std::string MetricsTokenPath(const std::string& data_dir);
// Reads the token, creating it (32 random bytes as hex, mode 0600, written
// atomically) when the file is missing, as `hpodd init` and every daemon start do.
// Surrounding whitespace in the file is ignored. kFailedPrecondition for an empty
// file; the file system's errors otherwise.
StatusOr<std::string> EnsureMetricsToken(const std::string& data_dir);

// GET /metrics: 401 with a one-line body unless the request carries
// `Authorization: Bearer <token>` (compared in constant time); else the scrape,
// `Content-Type: text/plain; version=0.0.4; charset=utf-8`, or 500 when a
// collector failed.
http::Response ServeMetrics(const http::Request& request, const std::string& token,
                            const Metrics& metrics);

}  // namespace hpod::controlplane
