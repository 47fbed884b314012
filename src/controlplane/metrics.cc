#include "hpod/controlplane/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <utility>

#include "hpod/api/model.h"
#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"
#include "hpod/controlplane/metrics_labels.h"

namespace hpod::controlplane {

const std::vector<double> kApiLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kReconcileBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,     2.5,  5,     10,   30,  60};
const std::vector<double> kStoreBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                           0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

namespace {

prometheus::Labels ToLabels(const Exposition::Labels& labels) {
  prometheus::Labels out;
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

void SetLabels(prometheus::ClientMetric& m, const Exposition::Labels& labels) {
  // The serializer writes them in this order; sorted, as the registry's are.
  // Every value bounded and valid UTF-8, wherever it came from (metrics_labels.h).
  for (const auto& [k, v] : ToLabels(labels)) m.label.push_back({k, BoundedLabelValue(v)});
}

}  // namespace

// ---- HistogramCounts ----

void HistogramCounts::Observe(double value) {
  // The first bucket whose bound is >= value (Prometheus's `le`), as
  // prometheus::Histogram::Observe counts it.
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[static_cast<size_t>(at)];
  sum += value;
}

void HistogramCounts::Add(const HistogramCounts& other) {
  HPOD_CHECK(other.bounds == bounds);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  sum += other.sum;
}

// ---- Exposition ----

prometheus::MetricFamily& Exposition::Family(const std::string& name, const std::string& help,
                                             int type) {
  auto it = index_.find(name);
  if (it != index_.end()) return families_[it->second];
  index_[name] = families_.size();
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = static_cast<prometheus::MetricType>(type);
  families_.push_back(std::move(f));
  return families_.back();
}

void Exposition::Gauge(const std::string& name, const std::string& help, const Labels& labels,
                       double value) {
  prometheus::ClientMetric m;
  SetLabels(m, labels);
  m.gauge.value = value;
  Family(name, help, static_cast<int>(prometheus::MetricType::Gauge)).metric.push_back(m);
}

void Exposition::Counter(const std::string& name, const std::string& help, const Labels& labels,
                         double value) {
  prometheus::ClientMetric m;
  SetLabels(m, labels);
  m.counter.value = value;
  Family(name, help, static_cast<int>(prometheus::MetricType::Counter)).metric.push_back(m);
}

void Exposition::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                           const std::vector<double>& buckets, const std::vector<double>& values) {
  HistogramCounts counts(buckets);
  for (double v : values) counts.Observe(v);
  Histogram(name, help, labels, counts);
}

void Exposition::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                           const HistogramCounts& counts) {
  // prometheus-cpp's own histogram writes the buckets (cumulative counts, +Inf).
  prometheus::Histogram h(counts.bounds);
  h.ObserveMultiple(std::vector<double>(counts.counts.begin(), counts.counts.end()), counts.sum);
  prometheus::ClientMetric m = h.Collect();
  SetLabels(m, labels);
  Family(name, help, static_cast<int>(prometheus::MetricType::Histogram)).metric.push_back(m);
}

void Exposition::Append(std::vector<prometheus::MetricFamily> families) {
  for (auto& f : families) {
    index_[f.name] = families_.size();
    families_.push_back(std::move(f));
  }
}

std::string Exposition::Text() const { return prometheus::TextSerializer().Serialize(families_); }

// ---- Metrics ----

struct Metrics::Families {
  prometheus::Family<prometheus::Counter>* api_requests;
  prometheus::Family<prometheus::Histogram>* api_duration;
  prometheus::Family<prometheus::Histogram>* reconcile_duration;
  prometheus::Family<prometheus::Counter>* reconcile_errors;
  prometheus::Family<prometheus::Histogram>* store_duration;
};

Metrics::Metrics(std::string version)
    : version_(std::move(version)),
      registry_(std::make_unique<prometheus::Registry>()),
      families_(std::make_unique<Families>()) {
  Families& f = *families_;
  f.api_requests = &prometheus::BuildCounter()
                        .Name("hpod_api_requests_total")
                        .Help("API requests (POST /) by operation and HTTP status")
                        .Register(*registry_);
  f.api_duration = &prometheus::BuildHistogram()
                        .Name("hpod_api_request_duration_seconds")
                        .Help("Time to answer an API request, by operation")
                        .Register(*registry_);
  f.reconcile_duration = &prometheus::BuildHistogram()
                              .Name("hpod_reconcile_duration_seconds")
                              .Help("Time of one reconcile pass, by reconciler")
                              .Register(*registry_);
  f.reconcile_errors = &prometheus::BuildCounter()
                            .Name("hpod_reconcile_errors_total")
                            .Help("Reconcile passes that returned an error (requeued)")
                            .Register(*registry_);
  f.store_duration = &prometheus::BuildHistogram()
                          .Name("hpod_store_transaction_duration_seconds")
                          .Help("Time of one store transaction, waiting included, by mode")
                          .Register(*registry_);
}

Metrics::~Metrics() = default;

void Metrics::ObserveApiRequest(std::string_view operation, int http_status, double seconds) {
  const std::string op(operation);
  families_->api_requests->Add({{"operation", op}, {"code", std::to_string(http_status)}})
      .Increment();
  families_->api_duration->Add({{"operation", op}}, kApiLatencyBuckets).Observe(seconds);
}

void Metrics::ObserveReconcile(std::string_view reconciler, double seconds, bool failed) {
  const prometheus::Labels labels = {{"reconciler", std::string(reconciler)}};
  families_->reconcile_duration->Add(labels, kReconcileBuckets).Observe(seconds);
  // Created at the first pass, so a rate() of it exists before the first error.
  auto& errors = families_->reconcile_errors->Add(labels);
  if (failed) errors.Increment();
}

void Metrics::ObserveStoreTransaction(std::string_view mode, double seconds) {
  families_->store_duration->Add({{"mode", std::string(mode)}}, kStoreBuckets).Observe(seconds);
}

void Metrics::AddCollector(Collector collector) { collectors_.push_back(std::move(collector)); }

StatusOr<Exposition> Metrics::Collect() const {
  Exposition out;
  try {
    out.Append(registry_->Collect());
    out.Gauge("hpod_build_info", "hpodd's version (always 1)", {{"version", version_}}, 1);
    for (const auto& c : collectors_) HPOD_RETURN_IF_ERROR(c(out));
  } catch (const std::exception& e) {
    // prometheus-cpp throws only for invalid names and labels: a defect here.
    return InternalError(std::string("collecting metrics: ") + e.what());
  }
  return out;
}

StatusOr<std::string> Metrics::Scrape() const {
  HPOD_ASSIGN_OR_RETURN(Exposition e, Collect());
  return e.Text();
}

std::string ApiOperationLabel(const http::Request& request) {
  if (request.method != "POST" || request.Path() != "/") return "unknown";
  std::string_view target = request.HeaderValue("X-Amz-Target");
  const size_t dot = target.find('.');
  if (dot == std::string_view::npos) return "unknown";
  std::string_view op = target.substr(dot + 1);
  return api::ServiceModel::Get().FindOperation(op) != nullptr ? std::string(op) : "unknown";
}

// ---- TimedStore ----

TimedStore::TimedStore(std::unique_ptr<store::Store> inner, Metrics& metrics, const Clock& clock)
    : inner_(std::move(inner)), metrics_(metrics), clock_(clock) {}

Status TimedStore::Write(const std::function<Status(store::WriteTx&)>& fn) {
  const auto start = clock_.SteadyNow();
  Status s = inner_->Write(fn);
  metrics_.ObserveStoreTransaction(
      "write", std::chrono::duration<double>(clock_.SteadyNow() - start).count());
  return s;
}

Status TimedStore::Read(const std::function<Status(store::ReadTx&)>& fn) {
  const auto start = clock_.SteadyNow();
  Status s = inner_->Read(fn);
  metrics_.ObserveStoreTransaction(
      "read", std::chrono::duration<double>(clock_.SteadyNow() - start).count());
  return s;
}

// ---- The token and the route ----

std::string MetricsTokenPath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "metrics-token").string();
}

namespace {

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

}  // namespace

StatusOr<std::string> EnsureMetricsToken(const std::string& data_dir) {
  const std::string path = MetricsTokenPath(data_dir);
  auto text = ReadFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    std::string token = HexEncode(RandomBytes(32));
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(path, token + "\n", 0600));
    return token;
  }
  if (!text.ok()) return text.status();
  std::string token = Trim(*text);
  if (token.empty()) {
    return FailedPreconditionError(path +
                                   " is empty; delete it and restart hpodd to get a new "
                                   "metrics token");
  }
  return token;
}

http::Response ServeMetrics(const http::Request& request, const std::string& token,
                            const Metrics& metrics) {
  http::Response r;
  std::string_view auth = request.HeaderValue("Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  const bool bearer = auth.size() > kScheme.size() && auth.substr(0, kScheme.size()) == kScheme;
  if (token.empty() || !bearer || !ConstantTimeEquals(auth.substr(kScheme.size()), token)) {
    r.status = 401;
    r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
    r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"hpodd metrics\""});
    r.body = "hpodd /metrics needs Authorization: Bearer <the token in <data-dir>/metrics-token>\n";
    return r;
  }
  auto text = metrics.Scrape();
  if (!text.ok()) {
    r.status = 500;
    r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
    r.body = "hpodd could not collect its metrics: " + std::string(text.status().message()) + "\n";
    return r;
  }
  r.headers.push_back({"Content-Type", "text/plain; version=0.0.4; charset=utf-8"});
  r.body = std::move(*text);
  return r;
}

}  // namespace hpod::controlplane
