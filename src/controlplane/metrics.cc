#include "hpod/controlplane/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <numeric>
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

// Text format 0.0.4: a label value escapes backslash, double quote and newline;
// HELP text escapes backslash and newline.
void AppendEscaped(std::string& out, std::string_view v, bool label_value) {
  size_t start = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    const char* with = c == '\\'                 ? "\\\\"
                       : c == '\n'               ? "\\n"
                       : label_value && c == '"' ? "\\\""
                                                 : nullptr;
    if (with == nullptr) continue;
    out.append(v.data() + start, i - start);
    out.append(with);
    start = i + 1;
  }
  out.append(v.data() + start, v.size() - start);
}

// Every value bounded and valid UTF-8, wherever it came from (metrics_labels.h);
// short ASCII, nearly every value, needs no copy.
void AppendLabelValue(std::string& out, std::string_view v) {
  bool plain = v.size() <= kMaxLabelValueBytes;
  for (size_t i = 0; plain && i < v.size(); ++i) plain = static_cast<unsigned char>(v[i]) < 0x80;
  if (plain) {
    AppendEscaped(out, v, true);
  } else {
    AppendEscaped(out, BoundedLabelValue(v), true);
  }
}

// One sample line: name, labels sorted by name (then `le` when given), value.
void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const Exposition::Labels& labels, const double* le, double value) {
  out.append(name);
  out.append(suffix);
  if (!labels.empty() || le != nullptr) {
    // Sorted, as the registry's are; a handful of labels, sorted in place.
    const Exposition::Label* small[8];
    std::vector<const Exposition::Label*> large;
    const Exposition::Label** order = small;
    if (labels.size() > std::size(small)) {
      large.resize(labels.size());
      order = large.data();
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      size_t j = i;
      for (; j > 0 && order[j - 1]->first > labels[i].first; --j) order[j] = order[j - 1];
      order[j] = &labels[i];
    }
    out.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out.push_back(',');
      Exposition::AppendLabel(out, order[i]->first, order[i]->second);
    }
    if (le != nullptr) {
      out.append(labels.empty() ? "le=\"" : ",le=\"");
      Exposition::AppendValue(out, *le);
      out.push_back('"');
    }
    out.push_back('}');
  }
  out.push_back(' ');
  Exposition::AppendValue(out, value);
  out.push_back('\n');
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

void Exposition::AppendLabel(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append("=\"");
  AppendLabelValue(out, value);
  out.push_back('"');
}

void Exposition::AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
  } else if (std::isinf(v)) {
    out.append(v < 0 ? "-Inf" : "+Inf");
  } else {
    char buf[32];
    // Most samples are whole (bytes, counts, zero): written as an integer, as
    // to_chars writes a double it would choose fixed notation for (that is, unless
    // scientific is shorter: 1e+06), at a fraction of the cost.
    constexpr double kExact = 9007199254740992.0;  // 2^53: every integer below is exact
    // Negatives (-0 among them) take the general path; they are rare here.
    if (!std::signbit(v) && v < kExact && v == static_cast<double>(static_cast<int64_t>(v))) {
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(v));
      const std::ptrdiff_t length = end - buf;
      std::ptrdiff_t zeros = 0;
      while (zeros < length - 1 && end[-1 - zeros] == '0') ++zeros;
      const std::ptrdiff_t significant = length - zeros;
      // d[.ddd]e+XX: the exponent of an integer below 2^53 has two digits.
      if (significant + (significant > 1) + 4 >= length) {
        out.append(buf, static_cast<size_t>(length));
        return;
      }
    }
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, ec == std::errc() ? end - buf : 0);
  }
}

void Exposition::Start(std::string_view name) {
  if (!families_.empty()) families_.back().end = text_.size();
  index_.emplace(std::string(name), families_.size());
  Family f;
  f.name = std::string(name);
  f.begin = text_.size();
  families_.push_back(std::move(f));
}

std::string& Exposition::Samples(std::string_view name, std::string_view help, const char* type) {
  auto it = index_.find(name);
  if (it != index_.end()) {
    return it->second + 1 == families_.size() ? text_ : families_[it->second].more;
  }
  Start(name);
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  AppendEscaped(text_, help, false);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
  return text_;
}

void Exposition::Gauge(std::string_view name, std::string_view help, const Labels& labels,
                       double value) {
  AppendSample(Samples(name, help, "gauge"), name, "", labels, nullptr, value);
}

void Exposition::Counter(std::string_view name, std::string_view help, const Labels& labels,
                         double value) {
  AppendSample(Samples(name, help, "counter"), name, "", labels, nullptr, value);
}

void Exposition::Histogram(std::string_view name, std::string_view help, const Labels& labels,
                           const std::vector<double>& buckets, const std::vector<double>& values) {
  HistogramCounts counts(buckets);
  for (double v : values) counts.Observe(v);
  Histogram(name, help, labels, counts);
}

void Exposition::Histogram(std::string_view name, std::string_view help, const Labels& labels,
                           const HistogramCounts& counts) {
  // Cumulative buckets, then +Inf (every observation), _sum and _count.
  std::string& out = Samples(name, help, "histogram");
  uint64_t total = 0;
  for (size_t i = 0; i < counts.bounds.size(); ++i) {
    total += counts.counts[i];
    AppendSample(out, name, "_bucket", labels, &counts.bounds[i], static_cast<double>(total));
  }
  total += counts.counts.back();
  const double inf = std::numeric_limits<double>::infinity();
  AppendSample(out, name, "_bucket", labels, &inf, static_cast<double>(total));
  AppendSample(out, name, "_sum", labels, nullptr, counts.sum);
  AppendSample(out, name, "_count", labels, nullptr, static_cast<double>(total));
}

void Exposition::Append(const std::vector<prometheus::MetricFamily>& families) {
  for (const auto& f : families) {
    // The serializer writes HELP and TYPE with the samples. The registry's names
    // are not the collectors'.
    const std::string text = prometheus::TextSerializer().Serialize({f});
    auto it = index_.find(f.name);
    if (it != index_.end() && it->second + 1 != families_.size()) {
      families_[it->second].more += text;
      continue;
    }
    if (it == index_.end()) Start(f.name);
    text_ += text;
  }
}

bool Exposition::Spliced() const {
  return std::any_of(families_.begin(), families_.end(),
                     [](const Family& f) { return !f.more.empty(); });
}

std::string Exposition::Text() const& {
  if (!Spliced()) return text_;
  std::string out;
  out.reserve(text_.size() +
              std::accumulate(families_.begin(), families_.end(), size_t{0},
                              [](size_t n, const Family& f) { return n + f.more.size(); }));
  for (const auto& f : families_) {
    const size_t end = f.end == std::string::npos ? text_.size() : f.end;
    out.append(text_, f.begin, end - f.begin);
    out += f.more;
  }
  return out;
}

std::string Exposition::Text() && {
  if (!Spliced()) return std::move(text_);
  return static_cast<const Exposition&>(*this).Text();
}

// ---- Metrics ----

struct Metrics::Families {
  prometheus::Family<prometheus::Counter>* api_requests;
  prometheus::Family<prometheus::Histogram>* api_duration;
  prometheus::Family<prometheus::Histogram>* reconcile_duration;
  prometheus::Family<prometheus::Counter>* reconcile_errors;
  prometheus::Family<prometheus::Histogram>* store_duration;
  prometheus::Counter* api_cache_hits;
  prometheus::Counter* api_cache_misses;
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
  auto& cache = prometheus::BuildCounter()
                    .Name("hpod_api_response_cache_lookups_total")
                    .Help(
                        "Read-only API answers looked up in the response cache, by result "
                        "(a hit is served without reading the store)")
                    .Register(*registry_);
  f.api_cache_hits = &cache.Add({{"result", "hit"}});
  f.api_cache_misses = &cache.Add({{"result", "miss"}});
}

Metrics::~Metrics() = default;

void Metrics::ObserveApiRequest(std::string_view operation, int http_status, double seconds) {
  const std::string op(operation);
  families_->api_requests->Add({{"operation", op}, {"code", std::to_string(http_status)}})
      .Increment();
  families_->api_duration->Add({{"operation", op}}, kApiLatencyBuckets).Observe(seconds);
}

void Metrics::CountApiCacheLookup(bool hit) {
  (hit ? families_->api_cache_hits : families_->api_cache_misses)->Increment();
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
  // The last scrape's size and some: the text is written once, not regrown.
  const size_t last = last_size_.load(std::memory_order_relaxed);
  out.Reserve(last + last / 8);
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
  std::string text = std::move(e).Text();
  last_size_.store(text.size(), std::memory_order_relaxed);
  return text;
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
