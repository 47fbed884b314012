// hpodd's metrics registry, the /metrics token and route, promtool's lint of a
// real exposition, and the examples/observability files checked against it.

#include "hpod/controlplane/metrics.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"
#include "hpod/controlplane/api_server.h"
#include "hpod/controlplane/init.h"
#include "hpod/controlplane/metrics_test_util.h"
#include "hpod/controlplane/node_logs.h"

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;
using testing::Key;
using testing::Samples;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("hpod-metrics-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string Scrape(const Metrics& m) {
  auto text = m.Scrape();
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

http::Request Api(const std::string& target_header, const std::string& method = "POST",
                  const std::string& path = "/") {
  http::Request r;
  r.method = method;
  r.target = path;
  r.headers.push_back({"Content-Type", "application/x-amz-json-1.1"});
  if (!target_header.empty()) r.headers.push_back({"X-Amz-Target", target_header});
  r.body = "{}";
  return r;
}

TEST(MetricsTest, ApiRequestsAreCountedWithBoundedOperationLabels) {
  FakeClock clock;
  auto store = std::move(store::OpenSqliteStore({}).value());
  TempDir dir;
  NodeLogs logs(NodeLogsOptions{(dir.path() / "logs").string()});
  ControlPlaneOptions options;
  ClusterApi api(*store, clock, options, PageTokenCodec("secret"), [](const std::string&) {});
  NodeApi node_api(*store, clock, nullptr, logs, nullptr);
  Metrics metrics("9.9.9");
  ApiServerOptions ao;
  ao.insecure_no_auth = true;
  ApiServer server(*store, api, node_api, clock, ao, &metrics);

  EXPECT_EQ(server.Handle(Api("SageMaker.ListClusters")).status, 200);
  EXPECT_EQ(server.Handle(Api("SageMaker.ListClusters")).status, 200);
  EXPECT_EQ(server.Handle(Api("SageMaker.DescribeCluster")).status, 400);  // no ClusterName
  // Whatever a client puts in the header or the path, the label set stays bounded.
  EXPECT_EQ(server.Handle(Api("SageMaker.Op-a1b2c3d4-per-request")).status, 400);
  EXPECT_EQ(server.Handle(Api("no dot at all")).status, 400);
  EXPECT_EQ(server.Handle(Api("SageMaker.ListClusters", "GET", "/some/path")).status, 400);

  const std::string text = Scrape(metrics);
  auto s = Samples(text);
  EXPECT_EQ(s[Key("hpod_api_requests_total", {{"code", "200"}, {"operation", "ListClusters"}})], 2);
  EXPECT_EQ(s[Key("hpod_api_requests_total", {{"code", "400"}, {"operation", "DescribeCluster"}})],
            1);
  EXPECT_EQ(s[Key("hpod_api_requests_total", {{"code", "400"}, {"operation", "unknown"}})], 3);
  EXPECT_EQ(text.find("a1b2c3d4"), std::string::npos);
  EXPECT_EQ(text.find("some/path"), std::string::npos);
  EXPECT_EQ(s[Key("hpod_api_request_duration_seconds_count", {{"operation", "ListClusters"}})], 2);
  EXPECT_EQ(s[Key("hpod_build_info", {{"version", "9.9.9"}})], 1);
}

TEST(MetricsTest, OperationLabelKnowsTheModelsOperations) {
  EXPECT_EQ(ApiOperationLabel(Api("SageMaker.CreateCluster")), "CreateCluster");
  EXPECT_EQ(ApiOperationLabel(Api("SageMaker.HpodListRecoveries")), "HpodListRecoveries");
  EXPECT_EQ(ApiOperationLabel(Api("SageMaker.createcluster")), "unknown");
  EXPECT_EQ(ApiOperationLabel(Api("")), "unknown");
  EXPECT_EQ(ApiOperationLabel(Api("SageMaker.CreateCluster", "PUT")), "unknown");
}

TEST(MetricsTest, StoreTransactionsAndReconcilePassesAreTimed) {
  FakeClock clock;
  Metrics metrics("0");
  TimedStore store(std::move(store::OpenSqliteStore({}).value()), metrics, clock);
  ASSERT_TRUE(store
                  .Write([&](store::WriteTx& tx) {
                    clock.AdvanceTime(std::chrono::milliseconds(7));
                    return tx.PutSetting("k", "v");
                  })
                  .ok());
  std::string v;
  ASSERT_TRUE(store
                  .Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(v, tx.GetSetting("k"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(v, "v");
  // A failed transaction is timed too (it held the writer as long).
  EXPECT_FALSE(store.Write([](store::WriteTx&) { return AbortedError("no"); }).ok());
  metrics.ObserveReconcile("cluster", 0.5, false);
  metrics.ObserveReconcile("cluster", 0.25, true);
  metrics.ObserveReconcile("health", 0.01, false);

  auto s = Samples(Scrape(metrics));
  EXPECT_EQ(s[Key("hpod_store_transaction_duration_seconds_count", {{"mode", "write"}})], 2);
  EXPECT_DOUBLE_EQ(s[Key("hpod_store_transaction_duration_seconds_sum", {{"mode", "write"}})],
                   0.007);
  EXPECT_EQ(s[Key("hpod_store_transaction_duration_seconds_count", {{"mode", "read"}})], 1);
  EXPECT_EQ(s[Key("hpod_reconcile_duration_seconds_count", {{"reconciler", "cluster"}})], 2);
  EXPECT_EQ(s[Key("hpod_reconcile_duration_seconds_sum", {{"reconciler", "cluster"}})], 0.75);
  EXPECT_EQ(s[Key("hpod_reconcile_errors_total", {{"reconciler", "cluster"}})], 1);
  // Present at zero from the first pass, so rate() has a start.
  EXPECT_EQ(s.count(Key("hpod_reconcile_errors_total", {{"reconciler", "health"}})), 1u);
  EXPECT_EQ(s[Key("hpod_reconcile_errors_total", {{"reconciler", "health"}})], 0);
}

TEST(MetricsTest, TokenIsMadeOnceOwnerOnlyAndReadBack) {
  TempDir dir;
  auto token = EnsureMetricsToken(dir.path().string());
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->size(), 64u);
  EXPECT_EQ(token->find_first_not_of("0123456789abcdef"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(MetricsTokenPath(dir.path().string()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*EnsureMetricsToken(dir.path().string()), *token) << "an existing token is kept";
  // One an operator wrote, with the newline an editor adds.
  ASSERT_TRUE(WriteFileAtomic(MetricsTokenPath(dir.path().string()), "  s3cret\n", 0600).ok());
  EXPECT_EQ(*EnsureMetricsToken(dir.path().string()), "s3cret");
  ASSERT_TRUE(WriteFileAtomic(MetricsTokenPath(dir.path().string()), "\n", 0600).ok());
  EXPECT_EQ(EnsureMetricsToken(dir.path().string()).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(EnsureMetricsToken((dir.path() / "missing" / "dir").string()).ok());
}

TEST(MetricsTest, InitCreatesTheToken) {
  TempDir dir;
  InitOptions o;
  o.data_dir = (dir.path() / "data").string();
  o.profile = "";  // no AWS profile
  FakeClock clock;
  auto r = InitDataDir(o, clock);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metrics_token_file, MetricsTokenPath(o.data_dir));
  auto token = ReadFile(r->metrics_token_file);
  ASSERT_TRUE(token.ok());
  // A second init keeps it (Prometheus's copy stays valid).
  ASSERT_TRUE(InitDataDir(o, clock).ok());
  EXPECT_EQ(*ReadFile(r->metrics_token_file), *token);
}

TEST(MetricsTest, RouteNeedsTheBearerToken) {
  Metrics metrics("0");
  const std::string token = "0123456789abcdef";
  auto get = [&](const std::string& authorization) {
    http::Request r;
    r.method = "GET";
    r.target = "/metrics";
    if (!authorization.empty()) r.headers.push_back({"Authorization", authorization});
    return ServeMetrics(r, token, metrics);
  };
  const std::vector<std::string> refused = {"",
                                            "Bearer",
                                            "Bearer ",
                                            "Bearer " + token + "x",
                                            "Bearer 0123456789abcdeF",
                                            "bearer " + token,
                                            "Basic " + token,
                                            token};
  for (const std::string& bad : refused) {
    http::Response r = get(bad);
    EXPECT_EQ(r.status, 401) << bad;
    EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1) << "one line: " << r.body;
    EXPECT_EQ(r.body.find("hpod_"), std::string::npos);
  }
  http::Response ok = get("Bearer " + token);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.HeaderValue("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(ok.body.find("hpod_build_info{version=\"0\"} 1"), std::string::npos) << ok.body;
  // No token configured: nothing matches, not even an empty one.
  http::Request r;
  r.method = "GET";
  r.target = "/metrics";
  r.headers.push_back({"Authorization", "Bearer "});
  EXPECT_EQ(ServeMetrics(r, "", metrics).status, 401);
}

TEST(MetricsTest, AFailingCollectorFailsTheScrape) {
  Metrics metrics("0");
  metrics.AddCollector([](Exposition&) { return UnavailableError("store is locked"); });
  http::Request r;
  r.method = "GET";
  r.target = "/metrics";
  r.headers.push_back({"Authorization", "Bearer t"});
  http::Response resp = ServeMetrics(r, "t", metrics);
  EXPECT_EQ(resp.status, 500);
  EXPECT_NE(resp.body.find("store is locked"), std::string::npos);
}

// Whole values take a shortcut: the text must be what std::to_chars writes for
// the double (Prometheus reads either, but a series must not change its form).
TEST(MetricsExpositionTest, ValuesAreWrittenAsToCharsWritesThem) {
  std::vector<double> values = {0,
                                -0.0,
                                1,
                                -1,
                                7,
                                10,
                                100,
                                1000,
                                10000,
                                100000,
                                1000000,
                                1200,
                                -1200,
                                12000000,
                                34359738368.0,
                                1099511627776.0,
                                1e15,
                                9007199254740991.0,
                                9007199254740992.0,
                                -9007199254740991.0,
                                1e17,
                                0.5,
                                17.25,
                                1234567.125,
                                2.5e-7,
                                123456789012345.0,
                                120000000000000.0,
                                -3e10,
                                -100000,
                                -10,
                                -1000000,
                                -120000};
  for (int64_t p = 1; p < (int64_t{1} << 53); p *= 3) {
    values.push_back(static_cast<double>(p));
    values.push_back(static_cast<double>(p * 10));
    values.push_back(-static_cast<double>(p * 1000));
  }
  for (double v : values) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    ASSERT_EQ(ec, std::errc());
    std::string got;
    Exposition::AppendValue(got, v);
    EXPECT_EQ(got, std::string(buf, end)) << v;
  }
}

// promtool from Debian's `prometheus` (a test-only package, scripts/install-deps.sh).
// Samples of a family added after another began still come out with their
// family, once, whichever form of Text() hands the text over; labels sorted,
// values escaped, numbers as Prometheus reads them.
TEST(MetricsExpositionTest, InterleavedFamiliesComeOutWhole) {
  Exposition e;
  e.Gauge("hpod_a", "A's help \\ with\na newline", {{"z", "1"}, {"b", "say \"hi\"\n"}}, 0.1);
  e.Counter("hpod_b_total", "B", {}, 3);
  e.Gauge("hpod_a", "A's help", {{"b", "2"}}, std::numeric_limits<double>::infinity());
  e.Histogram("hpod_h", "H", {{"k", "v"}}, {1, 2.5}, {0.5, 2, 7});
  e.Gauge("hpod_a", "A's help", {}, 1e21);
  const std::string want =
      "# HELP hpod_a A's help \\\\ with\\na newline\n"
      "# TYPE hpod_a gauge\n"
      "hpod_a{b=\"say \\\"hi\\\"\\n\",z=\"1\"} 0.1\n"
      "hpod_a{b=\"2\"} +Inf\n"
      "hpod_a 1e+21\n"
      "# HELP hpod_b_total B\n"
      "# TYPE hpod_b_total counter\n"
      "hpod_b_total 3\n"
      "# HELP hpod_h H\n"
      "# TYPE hpod_h histogram\n"
      "hpod_h_bucket{k=\"v\",le=\"1\"} 1\n"
      "hpod_h_bucket{k=\"v\",le=\"2.5\"} 2\n"
      "hpod_h_bucket{k=\"v\",le=\"+Inf\"} 3\n"
      "hpod_h_sum{k=\"v\"} 9.5\n"
      "hpod_h_count{k=\"v\"} 3\n";
  EXPECT_EQ(e.Text(), want);
  EXPECT_EQ(std::move(e).Text(), want);

  // Families added whole, one after the other: the text is handed over as it
  // was written.
  Exposition in_order;
  in_order.Gauge("hpod_a", "A", {}, 1);
  in_order.Gauge("hpod_a", "A", {{"x", "y"}}, 2);
  in_order.Counter("hpod_b_total", "B", {}, 3);
  EXPECT_EQ(std::move(in_order).Text(),
            "# HELP hpod_a A\n# TYPE hpod_a gauge\nhpod_a 1\nhpod_a{x=\"y\"} 2\n"
            "# HELP hpod_b_total B\n# TYPE hpod_b_total counter\nhpod_b_total 3\n");
}

std::string Promtool() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

TEST(MetricsExpositionTest, PromtoolAcceptsARealExposition) {
  const std::string promtool = Promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  const std::string text = testing::FullExpositionText();
  ASSERT_FALSE(text.empty());
  SubprocessOptions o;
  o.argv = {promtool, "check", "metrics"};
  o.stdin_data = text;
  o.timeout = std::chrono::seconds(30);
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // promtool prints lint findings ("counter metrics should have \"_total\" suffix",
  // "metric name should not include ...") and exits non-zero on any.
  EXPECT_EQ(r->exit_code, 0) << r->stdout_data << r->stderr_data << "\n" << text;
  EXPECT_EQ(r->stdout_data + r->stderr_data, "");
}

// The metric names of an exposition; a histogram's series are name_bucket, _sum
// and _count.
std::set<std::string> SeriesNames(const std::string& text) {
  std::set<std::string> names;
  for (const auto& [key, value] : Samples(text)) names.insert(key.substr(0, key.find('{')));
  return names;
}

void CollectTargets(const nlohmann::json& panels, std::vector<nlohmann::json>* out,
                    int* descriptions_mentioning_train) {
  for (const auto& p : panels) {
    ASSERT_TRUE(p.is_object());
    ASSERT_TRUE(p.contains("title") && p["title"].is_string()) << p.dump();
    if (p.value("description", "").find("hpod-train") != std::string::npos) {
      ++*descriptions_mentioning_train;
    }
    if (p.value("type", "") == "row") {
      if (p.contains("panels")) CollectTargets(p["panels"], out, descriptions_mentioning_train);
      continue;
    }
    ASSERT_TRUE(p.contains("targets") && p["targets"].is_array() && !p["targets"].empty())
        << "panel '" << p["title"] << "' has no targets";
    ASSERT_TRUE(p.contains("gridPos") && p["gridPos"].is_object()) << p["title"];
    for (const auto& t : p["targets"]) {
      ASSERT_TRUE(t.contains("expr") && t["expr"].is_string()) << p["title"];
      out->push_back(t);
    }
  }
}

TEST(MetricsExpositionTest, DashboardQueriesOnlyExportedMetrics) {
  std::ifstream in(std::string(HPOD_OBSERVABILITY_DIR) + "/grafana-dashboard.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json dash = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dash.is_discarded()) << "grafana-dashboard.json is not valid JSON";
  ASSERT_TRUE(dash.is_object());
  EXPECT_TRUE(dash.contains("title") && dash["title"].is_string());
  EXPECT_TRUE(dash.contains("uid") && dash["uid"].is_string());
  EXPECT_TRUE(dash.contains("schemaVersion") && dash["schemaVersion"].is_number_integer());
  ASSERT_TRUE(dash.contains("panels") && dash["panels"].is_array());
  std::vector<nlohmann::json> targets;
  int train_notes = 0;
  CollectTargets(dash["panels"], &targets, &train_notes);
  ASSERT_GE(targets.size(), 10u);
  EXPECT_GE(train_notes, 1) << "a training panel must say hpod-train exports no metrics";

  const std::set<std::string> exported = SeriesNames(testing::FullExpositionText());
  ASSERT_GT(exported.size(), 30u);
  const std::regex metric("hpod_[a-z0-9_]+");
  std::set<std::string> used;
  for (const auto& t : targets) {
    const std::string expr = t["expr"].get<std::string>();
    int n = 0;
    for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it, ++n) {
      used.insert(it->str());
      EXPECT_TRUE(exported.count(it->str()))
          << it->str() << " (in " << expr << ") is not a series hpodd exports";
    }
    EXPECT_GT(n, 0) << "no hpod metric in " << expr;
  }
  // The panels: clusters, nodes by status, recoveries and their duration,
  // API rate and latency, node CPU, memory and disk.
  for (const char* needed :
       {"hpod_clusters", "hpod_nodes", "hpod_recoveries_total",
        "hpod_recovery_duration_seconds_bucket", "hpod_api_requests_total",
        "hpod_api_request_duration_seconds_bucket", "hpod_node_cpu_seconds_total",
        "hpod_node_memory_available_bytes", "hpod_node_filesystem_avail_bytes"}) {
    EXPECT_TRUE(used.count(needed)) << "the dashboard has no panel on " << needed;
  }
}

TEST(MetricsExpositionTest, PrometheusConfigPassesPromtool) {
  const std::string yml = std::string(HPOD_OBSERVABILITY_DIR) + "/prometheus.yml";
  auto text = ReadFile(yml);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("credentials_file:"), std::string::npos);
  EXPECT_NE(text->find("metrics_path: /metrics"), std::string::npos);
  const std::string promtool = Promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  // promtool checks that the credentials file exists: point it at one here.
  TempDir dir;
  const std::string kExamplePath = "/var/lib/hpod/metrics-token";
  std::string config = *text;
  ASSERT_NE(config.find("credentials_file: " + kExamplePath), std::string::npos)
      << "prometheus.yml should name " << kExamplePath;
  for (size_t at; (at = config.find(kExamplePath)) != std::string::npos;) {
    config.replace(at, kExamplePath.size(), (dir.path() / "metrics-token").string());
  }
  ASSERT_TRUE(WriteFileAtomic((dir.path() / "metrics-token").string(), "t\n", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic((dir.path() / "prometheus.yml").string(), config).ok());
  SubprocessOptions o;
  o.argv = {promtool, "check", "config", (dir.path() / "prometheus.yml").string()};
  o.timeout = std::chrono::seconds(30);
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stdout_data << r->stderr_data;
}

}  // namespace
}  // namespace hpod::controlplane
