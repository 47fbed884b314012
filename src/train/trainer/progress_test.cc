#include "hpod/train/trainer/progress.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/subprocess.h"

namespace hpod::train {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Meter(int64_t n, std::optional<int64_t> total, double elapsed,
                  std::optional<double> rate = std::nullopt, std::string_view desc = "",
                  std::vector<PostfixItem> postfix = {}, bool ascii = false,
                  std::optional<int> ncols = std::nullopt) {
  return FormatMeter(n, total, elapsed, rate, desc, postfix, ascii, ncols);
}

// ---------------------------------------------------------------------------
// FormatMeter against the examples of training-building-blocks.md §11 and the seed.

TEST(FormatMeterTest, ReferenceExamples) {
  EXPECT_EQ(Meter(50, 100, 10), " 50%|█████     | 50/100 [00:10<00:10,  5.00it/s]");
  EXPECT_EQ(Meter(5, 100, 10), "  5%|▌         | 5/100 [00:10<03:10,  2.00s/it]");
  EXPECT_EQ(Meter(0, 100, 0), "  0%|          | 0/100 [00:00<?, ?it/s]");
  EXPECT_EQ(Meter(37, std::nullopt, 12.3), "37it [00:12,  3.01it/s]");
  // 22:26:14 elapsed; (20101 - 4499) / rate = 77:47:35.
  EXPECT_EQ(Meter(4499, 20101, 80774.2, 15602 / 280055.5, "Epoch 0",
                  {{"loss", std::string("2.43")}, {"v_num", int64_t{5563}}}),
            "Epoch 0:  22%|██▏       | 4499/20101 [22:26:14<77:47:35, 17.95s/it, loss=2.43, "
            "v_num=5563]");
}

// The seed's line. NeMo pre-formats `loss` as a string ('{:.3g}'); the other
// metrics are floats that Lightning's Tqdm.format_num pads to 5 characters.
constexpr std::string_view kSeedLine =
    "Epoch 0:  22%|██▏       | 4499/20101 [22:26:14<77:48:37, 17.95s/it, loss=2.43, "
    "reduced_train_loss=2.470, gradient_norm=0.121, parameter_norm=1864.0, "
    "global_step=4512.0, consumed_samples=1.16e+6, iteration_time=16.40]";

TEST(FormatMeterTest, SeedLineFromPlainTqdmFormatting) {
  // Plain tqdm.format_num: 2.47 would print "2.47", so those two were strings.
  std::vector<PostfixItem> postfix = {{"loss", std::string("2.43")},
                                      {"reduced_train_loss", std::string("2.470")},
                                      {"gradient_norm", 0.1213},
                                      {"parameter_norm", 1864.0},
                                      {"global_step", 4512.0},
                                      {"consumed_samples", 1155072.0},
                                      {"iteration_time", std::string("16.40")}};
  // remaining = (20101 - 4499) / rate = 280117.x s = 77:48:37.
  EXPECT_EQ(Meter(4499, 20101, 80774.6, 15602 / 280117.5, "Epoch 0", postfix), kSeedLine);
}

TEST(FormatMeterTest, SeedLineFromLightningNumbers) {
  std::vector<PostfixItem> postfix = {{"loss", std::string("2.43")}};
  for (auto [key, v] : std::vector<std::pair<std::string, double>>{{"reduced_train_loss", 2.47},
                                                                   {"gradient_norm", 0.1213},
                                                                   {"parameter_norm", 1864.0},
                                                                   {"global_step", 4512.0},
                                                                   {"consumed_samples", 1160000.0},
                                                                   {"iteration_time", 16.4}}) {
    postfix.push_back({key, LightningFormatNum(v)});
  }
  EXPECT_EQ(Meter(4499, 20101, 80774.6, 15602 / 280117.5, "Epoch 0", postfix), kSeedLine);
}

TEST(FormatMeterTest, RateUnitBoundary) {
  // s/it iff 1/rate > 1; exactly 1 it/s stays it/s.
  EXPECT_EQ(Meter(10, 100, 10, 1.0), " 10%|█         | 10/100 [00:10<01:30,  1.00it/s]");
  EXPECT_EQ(Meter(10, 100, 10, 0.999), " 10%|█         | 10/100 [00:10<01:30,  1.00s/it]");
  EXPECT_EQ(Meter(10, 100, 10, 1.001), " 10%|█         | 10/100 [00:10<01:29,  1.00it/s]");
  EXPECT_EQ(Meter(10, 100, 10, 0.5), " 10%|█         | 10/100 [00:10<03:00,  2.00s/it]");
  EXPECT_EQ(Meter(10, 100, 10, 123.456), " 10%|█         | 10/100 [00:10<00:00, 123.46it/s]");
  // Zero rate: unknown, with '?' remaining.
  EXPECT_EQ(Meter(0, 100, 10), "  0%|          | 0/100 [00:10<?, ?it/s]");
}

TEST(FormatMeterTest, HoursAreUnbounded) {
  EXPECT_EQ(FormatInterval(0), "00:00");
  EXPECT_EQ(FormatInterval(59.99), "00:59");
  EXPECT_EQ(FormatInterval(3599.9), "59:59");
  EXPECT_EQ(FormatInterval(3600), "1:00:00");
  EXPECT_EQ(FormatInterval(360000), "100:00:00");
  EXPECT_EQ(FormatInterval(1e7 + 61), "2777:47:41");
  EXPECT_EQ(Meter(1, 1000, 400000, 1.0 / 400000),
            "  0%|          | 1/1000 [111:06:40<110999:59:59, 400000.00s/it]");
}

TEST(FormatMeterTest, NoTotal) {
  EXPECT_EQ(Meter(37, std::nullopt, 12.3, std::nullopt, "Epoch 0"),
            "Epoch 0: 37it [00:12,  3.01it/s]");
  EXPECT_EQ(Meter(0, std::nullopt, 0), "0it [00:00, ?it/s]");
  // tqdm treats total 0 as no total, and n past the total too.
  EXPECT_EQ(Meter(5, 0, 10), "5it [00:10,  2.00s/it]");
  EXPECT_EQ(Meter(101, 100, 10, std::nullopt, "", {{"a", int64_t{1}}}),
            "101it [00:10, 10.10it/s, a=1]");
  EXPECT_EQ(Meter(100, 100, 10), "100%|██████████| 100/100 [00:10<00:00, 10.00it/s]");
}

TEST(FormatMeterTest, AsciiBar) {
  EXPECT_EQ(Meter(50, 100, 10, std::nullopt, "", {}, true),
            " 50%|#####     | 50/100 [00:10<00:10,  5.00it/s]");
  EXPECT_EQ(Meter(55, 100, 10, std::nullopt, "", {}, true),
            " 55%|#####5    | 55/100 [00:10<00:08,  5.50it/s]");
  EXPECT_EQ(Meter(100, 100, 10, std::nullopt, "", {}, true),
            "100%|##########| 100/100 [00:10<00:00, 10.00it/s]");
}

TEST(FormatMeterTest, NcolsSizesTheBar) {
  const std::string line = Meter(50, 100, 10, std::nullopt, "", {}, false, 80);
  EXPECT_EQ(DisplayWidth(line), 80);
  // 80 - 38 columns of text = 42 cells, half of them full.
  EXPECT_EQ(
      line, " 50%|" + [] {
        std::string s;
        for (int i = 0; i < 21; ++i) s += "█";
        return s + std::string(21, ' ');
      }() + "| 50/100 [00:10<00:10,  5.00it/s]");
  // No room: one cell, then the line is cut at ncols.
  EXPECT_EQ(Meter(50, 100, 10, std::nullopt, "", {}, false, 20), " 50%|▌| 50/100 [00:1");
  // ncols 0: no bar at all.
  EXPECT_EQ(Meter(50, 100, 10, std::nullopt, "", {}, false, 0),
            " 50% 50/100 [00:10<00:10,  5.00it/s]");
  // Wide characters count two columns.
  EXPECT_EQ(DisplayWidth("训练"), 4);
  EXPECT_EQ(DisplayWidth("\x1b[32m██\x1b[0m"), 2);
  EXPECT_EQ(DisplayWidth(Meter(50, 100, 10, std::nullopt, "训练", {}, false, 60)), 60);
}

TEST(FormatNumTest, TqdmCases) {
  EXPECT_EQ(FormatNum(2.43), "2.43");
  EXPECT_EQ(FormatNum(0.1213), "0.121");
  EXPECT_EQ(FormatNum(1864.0), "1864.0");
  EXPECT_EQ(FormatNum(1160000.0), "1.16e+6");
  EXPECT_EQ(FormatNum(1e-5), "1e-5");
  EXPECT_EQ(FormatNum(-0.5), "-.5");  // tqdm's "-0" -> "-" also hits the mantissa
  EXPECT_EQ(FormatNum(0.5), "0.5");
  EXPECT_EQ(FormatNum(100.0), "100");
  EXPECT_EQ(FormatNum(0.0), "0");
  EXPECT_EQ(FormatNum(-0.0), "-");
  EXPECT_EQ(FormatNum(1e16), "1e+16");
  EXPECT_EQ(FormatNum(NAN), "nan");
  EXPECT_EQ(FormatNum(-INFINITY), "-inf");
  EXPECT_EQ(FormatNum(int64_t{4512}), "4512");
  EXPECT_EQ(FormatNum(int64_t{1160000}), "1160000");  // same length: str wins
  EXPECT_EQ(FormatNum(int64_t{12345678}), "1.23e+7");
  EXPECT_EQ(FormatNum(int64_t{-12345678}), "-1.23e+7");
}

TEST(FormatNumTest, LightningPadding) {
  EXPECT_EQ(LightningFormatNum(2.47), "2.470");
  EXPECT_EQ(LightningFormatNum(16.4), "16.40");
  EXPECT_EQ(LightningFormatNum(2.0), "2.000");
  EXPECT_EQ(LightningFormatNum(100.0), "100.0");
  EXPECT_EQ(LightningFormatNum(0.1213), "0.121");
  EXPECT_EQ(LightningFormatNum(1864.0), "1864.0");
  EXPECT_EQ(LightningFormatNum(1160000.0), "1.16e+6");
  EXPECT_EQ(LightningFormatNum(-0.5), "-.500");
}

TEST(FormatNumTest, PythonFloatRepr) {
  EXPECT_EQ(PythonFloatRepr(0.1), "0.1");
  EXPECT_EQ(PythonFloatRepr(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(PythonFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PythonFloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(PythonFloatRepr(9007199254740992.0), "9007199254740992.0");
  EXPECT_EQ(PythonFloatRepr(1.5e-5), "1.5e-05");
  EXPECT_EQ(PythonFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PythonFloatRepr(-123456789.125), "-123456789.125");
  EXPECT_EQ(PythonFloatRepr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(PythonFloatRepr(5e-324), "5e-324");
  EXPECT_EQ(PythonFloatRepr(-0.0), "-0.0");
}

// ---------------------------------------------------------------------------
// Differential tests against Debian's python3-tqdm.

std::string Float17(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

nlohmann::json PostfixJson(const std::vector<PostfixItem>& postfix) {
  nlohmann::json items = nlohmann::json::array();
  for (const PostfixItem& item : postfix) {
    nlohmann::json v;
    if (const auto* d = std::get_if<double>(&item.value)) {
      v["d"] = Float17(*d);
    } else if (const auto* i = std::get_if<int64_t>(&item.value)) {
      v["i"] = *i;
    } else {
      v["s"] = std::get<std::string>(item.value);
    }
    items.push_back({item.key, v});
  }
  return items;
}

// Runs the oracle; nullopt (test skipped) when /usr/bin/python3 has no tqdm.
std::optional<nlohmann::json> RunOracle(const nlohmann::json& request) {
  SubprocessOptions options;
  options.argv = {"/usr/bin/python3", HPOD_TRAIN_TRAINER_TESTDATA "/tqdm_oracle.py"};
  options.stdin_data = request.dump();
  options.timeout = milliseconds(15000);
  auto result = RunCommand(options);
  if (!result.ok() || result->exit_code == 3) return std::nullopt;
  EXPECT_EQ(result->exit_code, 0) << result->stderr_data;
  if (result->exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(result->stdout_data);
}

struct MeterCase {
  int64_t n;
  std::optional<int64_t> total;
  double elapsed;
  std::optional<double> rate;
  std::string desc;
  std::vector<PostfixItem> postfix;
  bool ascii;
  std::optional<int> ncols;
};

std::vector<MeterCase> MeterCases() {
  std::vector<MeterCase> cases = {
      {4499, 20101, 80774.6, 15602 / 280117.5, "Epoch 0", {}, false, std::nullopt},
      {10, 100, 10, 1.0, "", {}, false, std::nullopt},
      {10, 100, 10, 0.999, "", {}, false, std::nullopt},
      {10, 100, 10, 1.0 + 1e-15, "", {}, false, std::nullopt},
      {10, 100, 10, 1.0 - 1e-15, "", {}, false, std::nullopt},
      {1, 1000, 400000, 1.0 / 400000, "", {}, true, std::nullopt},
      {5, 0, 10, std::nullopt, "x", {}, false, std::nullopt},
      {101, 100, 10, std::nullopt, "Epoch 3", {}, false, 80},
      {50, 100, 10, std::nullopt, "训练", {}, false, 60},
      {50, 100, 10, std::nullopt, "Epoch 0: ", {}, false, 20},
      {50, 100, 10, std::nullopt, "", {}, true, 0},
      {7, 8, 1e9, 1e-12, "", {}, false, std::nullopt},
      {3, 9, 2.5, 1e12, "", {}, false, std::nullopt},
      {0, 10, 0, std::nullopt, "", {{"s", std::string("  padded  ")}}, false, std::nullopt},
      {1, 10, 1, std::nullopt, "", {{"nan", double(NAN)}, {"inf", double(INFINITY)}}, false, 40},
  };
  // Random cases across magnitudes, fixed seed.
  std::mt19937_64 rng(20240611);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int k) { return static_cast<int>(rng() % k); };
  const std::optional<int64_t> totals[] = {std::nullopt, 0, 1, 7, 100, 20101, 1000000000000};
  const std::optional<int> ncols[] = {std::nullopt, std::nullopt, 0, 1, 25, 50, 80, 200};
  const char* descs[] = {"", "Epoch 0", "Epoch 12: ", "Validation", "训练"};
  for (int i = 0; i < 400; ++i) {
    MeterCase c;
    c.total = totals[pick(7)];
    const int64_t bound = c.total.value_or(1000000) + 1;
    c.n = static_cast<int64_t>(rng() % static_cast<uint64_t>(bound + (pick(10) == 0)));
    c.elapsed = pick(8) == 0 ? 0.0 : std::pow(10.0, uniform(-3, 7));
    if (pick(3) != 0) c.rate = pick(10) == 0 ? 0.0 : std::pow(10.0, uniform(-6, 6));
    c.desc = descs[pick(5)];
    const int nitems = pick(5);
    for (int k = 0; k < nitems; ++k) {
      const std::string key = "k" + std::to_string(k);
      switch (pick(4)) {
        case 0:
          c.postfix.push_back({key, (pick(2) ? -1 : 1) * std::pow(10.0, uniform(-8, 20))});
          break;
        case 1:
          c.postfix.push_back({key, std::round(std::pow(10.0, uniform(0, 9)))});
          break;
        case 2:
          c.postfix.push_back({key, static_cast<int64_t>(rng() >> pick(64)) * (pick(2) ? -1 : 1)});
          break;
        default:
          c.postfix.push_back({key, std::string("v") + std::to_string(pick(1000))});
      }
    }
    c.ascii = pick(4) == 0;
    c.ncols = ncols[pick(8)];
    cases.push_back(std::move(c));
  }
  return cases;
}

nlohmann::json Optional(const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

TEST(FormatMeterTest, MatchesDebianTqdm) {
  const std::vector<MeterCase> cases = MeterCases();
  nlohmann::json request;
  request["meters"] = nlohmann::json::array();
  for (const MeterCase& c : cases) {
    request["meters"].push_back({{"n", c.n},
                                 {"total", Optional(c.total)},
                                 {"elapsed", c.elapsed},
                                 {"rate", Optional(c.rate)},
                                 {"desc", c.desc},
                                 {"postfix", PostfixJson(c.postfix)},
                                 {"ascii", c.ascii},
                                 {"ncols", Optional(c.ncols)}});
  }
  auto reply = RunOracle(request);
  if (!reply) GTEST_SKIP() << "/usr/bin/python3 has no tqdm (apt-get install python3-tqdm)";
  ASSERT_EQ((*reply)["meters"].size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const MeterCase& c = cases[i];
    EXPECT_EQ(FormatMeter(c.n, c.total, c.elapsed, c.rate, c.desc, c.postfix, c.ascii, c.ncols),
              (*reply)["meters"][i].get<std::string>())
        << "case " << i << ": " << request["meters"][i].dump();
  }
}

// ---------------------------------------------------------------------------
// ProgressBar.

struct Op {
  double advance_s;
  int64_t inc;
  std::optional<std::vector<PostfixItem>> postfix;
  std::optional<std::string> desc;
};

struct BarRun {
  ProgressBarOptions options;
  std::vector<Op> ops;
  double close_advance_s;
};

// Drives a ProgressBar with a fake clock; `drain` is called after each write.
void Drive(const BarRun& run, std::FILE* stream, const std::function<void()>& drain) {
  FakeClock clock;
  ProgressBar bar(stream, clock, run.options);
  drain();
  for (const Op& op : run.ops) {
    clock.AdvanceTime(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(op.advance_s)));
    if (op.postfix) bar.SetPostfix(*op.postfix);
    if (op.desc) bar.SetDescription(*op.desc);
    bar.Update(op.inc);
    drain();
  }
  clock.AdvanceTime(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(run.close_advance_s)));
  bar.Close();
  drain();
}

// A pty whose slave passes bytes through unchanged (no "\n" -> "\r\n").
struct Pty {
  int master = -1, slave = -1;
  explicit Pty(unsigned short cols) {
    termios tio{};
    cfmakeraw(&tio);
    winsize ws{};
    ws.ws_col = cols;
    ws.ws_row = cols ? 24 : 0;
    if (openpty(&master, &slave, nullptr, &tio, &ws) != 0) ADD_FAILURE() << "openpty failed";
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  }
  ~Pty() {
    if (master >= 0) close(master);
  }
  // Reads what the slave side wrote; waits up to `wait_ms` for more once idle.
  void Drain(std::string* out, int wait_ms = 0) const {
    char buf[4096];
    while (true) {
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, wait_ms) <= 0) return;
      ssize_t n = read(master, buf, sizeof(buf));
      if (n <= 0) return;
      out->append(buf, n);
    }
  }
};

std::string RunOnPty(const BarRun& run, unsigned short cols) {
  Pty pty(cols);
  std::FILE* stream = fdopen(pty.slave, "w");  // owns the slave fd
  std::string out;
  Drive(run, stream, [&] { pty.Drain(&out); });  // keeps the pty buffer from filling up
  std::fclose(stream);
  pty.Drain(&out, 200);
  return out;
}

nlohmann::json RunJson(const BarRun& run) {
  nlohmann::json ops = nlohmann::json::array();
  for (const Op& op : run.ops) {
    ops.push_back({{"advance", op.advance_s},
                   {"inc", op.inc},
                   {"postfix", op.postfix ? PostfixJson(*op.postfix) : nlohmann::json(nullptr)},
                   {"desc", Optional(op.desc)}});
  }
  return {{"total", Optional(run.options.total)},
          {"initial", run.options.initial},
          {"desc", run.options.desc},
          {"ascii", run.options.ascii},
          {"ncols", Optional(run.options.ncols)},
          {"lightning", run.options.lightning_number_padding},
          {"ops", ops},
          {"close_advance", run.close_advance_s}};
}

std::vector<PostfixItem> StepMetrics(double loss, int64_t step) {
  return {{"loss", std::string(FormatNum(loss))},
          {"reduced_train_loss", loss},
          {"global_step", static_cast<double>(step)},
          {"consumed_samples", static_cast<double>(step * 256)}};
}

std::vector<BarRun> BarRuns() {
  std::vector<BarRun> runs;
  {  // Slow steps (s/it), Lightning numbers, a shrinking line (padding).
    BarRun r;
    r.options.desc = "Epoch 0";
    r.options.total = 20101;
    // Times are multiples of 1/16 s, exact both in our nanoseconds and in tqdm's
    // float seconds, so both sides compute bit-identical rates.
    r.ops = {{17.5, 1, StepMetrics(10.37, 1), std::nullopt},
             {18.25, 1, StepMetrics(9.5, 2), std::nullopt},
             {0.0625, 1, StepMetrics(9.25, 3), std::nullopt},  // < mininterval: not drawn
             {16.0, 1, StepMetrics(8.125, 4), std::nullopt},
             {17.875, 2, StepMetrics(2.47, 6), "Ep 0"},
             {20.0, -1, StepMetrics(2.5, 5), std::nullopt},  // no progress: not drawn
             {1000, 4490, StepMetrics(2.43, 4495), std::nullopt}};
    r.close_advance_s = 3.5;
    runs.push_back(r);
  }
  {  // Fast steps (it/s), plain tqdm numbers, ascii, resumed from `initial`.
    BarRun r;
    r.options.total = 1000;
    r.options.initial = 200;
    r.options.ascii = true;
    r.options.lightning_number_padding = false;
    for (int i = 0; i < 60; ++i) {
      r.ops.push_back({(1 + i % 7) / 64.0, 1 + i % 3,
                       std::vector<PostfixItem>{{"lr", 3e-4 * (1 + i)}, {"step", int64_t{i}}},
                       std::nullopt});
    }
    r.close_advance_s = 0;
    runs.push_back(r);
  }
  {  // No total, fixed width.
    BarRun r;
    r.options.desc = "Tokens";
    r.options.ncols = 60;
    r.ops = {{0.5, 100, std::nullopt, std::nullopt}, {0.5, 300, std::nullopt, std::nullopt}};
    r.close_advance_s = 1;
    runs.push_back(r);
  }
  {  // Fixed width with a bar.
    BarRun r;
    r.options.desc = "Epoch 1";
    r.options.total = 64;
    r.options.ncols = 100;
    for (int i = 0; i < 20; ++i) {
      r.ops.push_back({0.375, 3, StepMetrics(3.0 / (1 + i), i), std::nullopt});
    }
    r.close_advance_s = 0.25;
    runs.push_back(r);
  }
  return runs;
}

TEST(ProgressBarTest, TtyOutputMatchesDebianTqdm) {
  const std::vector<BarRun> runs = BarRuns();
  nlohmann::json request;
  request["bars"] = nlohmann::json::array();
  for (const BarRun& run : runs) request["bars"].push_back(RunJson(run));
  auto reply = RunOracle(request);
  if (!reply) GTEST_SKIP() << "/usr/bin/python3 has no tqdm (apt-get install python3-tqdm)";
  ASSERT_EQ((*reply)["bars"].size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    // A pty that reports no size: like tqdm writing to a file, 10 cells unless ncols.
    EXPECT_EQ(RunOnPty(runs[i], 0), (*reply)["bars"][i].get<std::string>()) << "run " << i;
  }
}

TEST(ProgressBarTest, TtyRedrawsInPlaceWithPadding) {
  BarRun run;
  run.options.total = 100;
  run.options.lightning_number_padding = false;
  run.ops = {{2, 1, std::vector<PostfixItem>{{"loss", 10.25}}, std::nullopt},
             {0.05, 1, std::nullopt, std::nullopt},  // within mininterval: not drawn
             {2, 1, std::vector<PostfixItem>{}, std::nullopt}};
  run.close_advance_s = 0;
  EXPECT_EQ(RunOnPty(run, 0),
            "\r  0%|          | 0/100 [00:00<?, ?it/s]"
            "\r  1%|          | 1/100 [00:02<03:18,  2.00s/it, loss=10.2]"
            // EMA: dn = 0.3*2 + 0.7*0.3*1 = 0.81, dt = 0.3*2.05 + 0.7*0.3*2 = 1.035.
            "\r  3%|▎         | 3/100 [00:04<02:03,  1.28s/it]           "
            // Close: the average, 3 / 4.05 s.
            "\r  3%|▎         | 3/100 [00:04<02:10,  1.35s/it]\n");
}

ProgressBarOptions Options(std::string desc, std::optional<int64_t> total,
                           std::optional<bool> is_tty = std::nullopt) {
  ProgressBarOptions options;
  options.desc = std::move(desc);
  options.total = total;
  options.is_tty = is_tty;
  return options;
}

TEST(ProgressBarTest, DetectsTerminalWidth) {
  Pty pty(100);
  std::FILE* stream = fdopen(pty.slave, "w");
  FakeClock clock;
  {
    ProgressBar bar(stream, clock, Options("", 10));
    EXPECT_TRUE(bar.is_tty());
    EXPECT_EQ(bar.ncols(), 100);
    clock.AdvanceTime(seconds(1));
    bar.Update(5);
    EXPECT_EQ(DisplayWidth(bar.CurrentLine()), 100);
  }
  std::string out;
  pty.Drain(&out, 200);
  EXPECT_THAT(out, testing::EndsWith("| 5/10 [00:01<00:01,  5.00it/s]\n"));
  std::fclose(stream);
}

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST(ProgressBarTest, NonTtyWritesOneLinePerUpdateAtMostEveryInterval) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  unsetenv("COLUMNS");  // a file has no width: 10 cells
  FakeClock clock;
  {
    ProgressBar bar(f, clock, Options("Epoch 0", 100));
    EXPECT_FALSE(bar.is_tty());
    EXPECT_EQ(bar.ncols(), std::nullopt);
    clock.AdvanceTime(seconds(2));
    EXPECT_FALSE(bar.Update());  // 2 s < 10 s since the last line
    clock.AdvanceTime(seconds(9));
    bar.SetPostfix({{"loss", 2.47}, {"global_step", 2.0}});
    EXPECT_TRUE(bar.Update());  // 11 s: written, rate 2 / 11 s
    clock.AdvanceTime(seconds(20));
    EXPECT_TRUE(bar.Update());  // slow steps: every one is written
    clock.AdvanceTime(milliseconds(500));
    EXPECT_FALSE(bar.Update());
  }  // the destructor closes: the final line with the average rate
  EXPECT_EQ(ReadAll(f),
            "Epoch 0:   0%|          | 0/100 [00:00<?, ?it/s]\n"
            "Epoch 0:   2%|▏         | 2/100 [00:11<08:59,  5.50s/it, loss=2.470, "
            "global_step=2.000]\n"
            // EMA: dn = 0.3*1 + 0.7*0.6 = 0.72, dt = 0.3*20 + 0.7*3.3 = 8.31.
            "Epoch 0:   3%|▎         | 3/100 [00:31<18:39, 11.54s/it, loss=2.470, "
            "global_step=2.000]\n"
            "Epoch 0:   4%|▍         | 4/100 [00:31<12:36,  7.88s/it, loss=2.470, "
            "global_step=2.000]\n");
  std::fclose(f);
}

TEST(ProgressBarTest, WidthFromEnvironmentWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  FakeClock clock;
  // tqdm: COLUMNS - 1, only when LINES is set too.
  setenv("COLUMNS", "81", 1);
  unsetenv("LINES");
  EXPECT_EQ(ProgressBar(f, clock, Options("", 10)).ncols(), std::nullopt);
  setenv("LINES", "24", 1);
  EXPECT_EQ(ProgressBar(f, clock, Options("", 10)).ncols(), 80);
  setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(ProgressBar(f, clock, Options("", 10)).ncols(), std::nullopt);
  unsetenv("COLUMNS");
  unsetenv("LINES");
  std::fclose(f);
}

TEST(ProgressBarTest, CloseIsIdempotentAndStopsUpdates) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  FakeClock clock;
  ProgressBar bar(f, clock, Options("", 4, true));
  clock.AdvanceTime(seconds(1));
  bar.Update(4);
  bar.Close();
  bar.Close();
  EXPECT_TRUE(bar.closed());
  EXPECT_FALSE(bar.Update());
  bar.Refresh();
  EXPECT_EQ(ReadAll(f),
            "\r  0%|          | 0/4 [00:00<?, ?it/s]"
            "\r100%|██████████| 4/4 [00:01<00:00,  4.00it/s]"
            "\r100%|██████████| 4/4 [00:01<00:00,  4.00it/s]\n");
  std::fclose(f);
}

}  // namespace
}  // namespace hpod::train
