#include "hpod/train/trainer/tfevents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/crc32c.h"
#include "hpod/base/subprocess.h"

namespace hpod::train {
namespace {

namespace fs = std::filesystem;

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tfevents_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TfeventsEncodingTest, ScalarEventBytes) {
  const std::pair<std::string, float> values[] = {{"loss", 2.5f}};
  const std::string event = EncodeScalarsEvent(1.5, 300, values);
  // wall_time: tag 0x09, 1.5 as little-endian double.
  // step:      tag 0x10, varint 300 = ac 02.
  // summary:   tag 0x2a, len 0x0d; value: tag 0x0a, len 0x0b;
  //            tag: 0x0a 04 "loss"; simple_value: tag 0x15, 2.5f = 00 00 20 40.
  EXPECT_EQ(Hex(event),
            "09000000000000f83f"
            "10ac02"
            "2a0d0a0b0a046c6f7373"
            "1500002040");
  const std::string record = FrameRecord(event);
  ASSERT_EQ(record.size(), 8 + 4 + event.size() + 4);
  EXPECT_EQ(Hex(record.substr(0, 8)), "1b00000000000000");  // 27 bytes, little-endian
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(record[at + i]);
    return v;
  };
  EXPECT_EQ(u32(8), MaskCrc32c(Crc32c(record.data(), 8)));
  EXPECT_EQ(record.substr(12, event.size()), event);
  EXPECT_EQ(u32(12 + event.size()), MaskCrc32c(Crc32c(event)));
}

TEST(TfeventsEncodingTest, FileVersionAndNegativeStep) {
  EXPECT_EQ(Hex(EncodeFileVersionEvent(0.0, "brain.Event:2")),
            "090000000000000000"
            "1a0d627261696e2e4576656e743a32");
  const std::string event = EncodeScalarsEvent(0.0, -1, {});
  // int64 -1: ten-byte varint; empty summary still present.
  EXPECT_EQ(Hex(event),
            "090000000000000000"
            "10ffffffffffffffffff01"
            "2a00");
}

TEST(EventWriterTest, FileNameAndFirstRecord) {
  TempDir dir;
  FakeClock clock(std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000123456)));
  auto writer = EventWriter::Create(dir.path() + "/run1/tb", clock);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string name = fs::path((*writer)->path()).filename().string();
  EXPECT_THAT(name, testing::StartsWith("events.out.tfevents.1700000123." + std::string(host) +
                                        "." + std::to_string(getpid()) + "."));
  EXPECT_EQ(fs::path((*writer)->path()).parent_path(), fs::path(dir.path() + "/run1/tb"));
  const std::string bytes = ReadFile((*writer)->path());
  EXPECT_EQ(bytes, FrameRecord(EncodeFileVersionEvent(1700000123.456, "brain.Event:2")));

  // A second writer in the same second gets its own file.
  auto second = EventWriter::Create(dir.path() + "/run1/tb", clock);
  ASSERT_TRUE(second.ok());
  EXPECT_NE((*second)->path(), (*writer)->path());
}

TEST(EventWriterTest, RejectsBadTags) {
  TempDir dir;
  auto writer = EventWriter::Create(dir.path());
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->AddScalar("", 1, 1.0f, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->AddScalar("bad\xff", 1, 1.0f, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->AddScalar("\xc0\xaf", 1, 1.0f, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*writer)->AddScalar("train/größe", 1, 1.0f, 0).ok());
}

TEST(EventWriterTest, CreateFailsOnAFile) {
  TempDir dir;
  std::ofstream(dir.path() + "/plain") << "x";
  auto writer = EventWriter::Create(dir.path() + "/plain/sub");
  EXPECT_FALSE(writer.ok());
}

// The written file, decoded by protoc-generated classes with CRCs checked by
// python3-crc32c (testdata/tfevents_decode.py).
TEST(EventWriterTest, DecodesWithProtobufDefinitions) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  FakeClock clock;
  auto created = EventWriter::Create(dir.path(), clock);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EventWriter& writer = **created;

  struct Written {
    int64_t step;
    double wall_time;
    std::vector<std::pair<std::string, float>> values;
  };
  std::vector<Written> written;
  for (int64_t step = 0; step < 50; ++step) {
    const double wall = 1700000000.25 + step * 1.125;
    std::vector<std::pair<std::string, float>> values = {
        {"train/loss", 10.0f / (1 + step)},
        {"train/lr", 3e-4f * std::min<float>(1, step / 10.0f)},
        {"train/grad_norm", 0.5f + step},
        {"perf/tokens_per_s", 123456.78f * step}};
    ASSERT_TRUE(writer.AddScalars(step, wall, values).ok());
    written.push_back({step, wall, values});
  }
  ASSERT_TRUE(writer.AddScalar("ckpt/stall_ms", 1LL << 40, -0.0f, 1.0).ok());
  written.push_back({1LL << 40, 1.0, {{"ckpt/stall_ms", -0.0f}}});
  ASSERT_TRUE(writer.AddScalar("weird", -7, std::numeric_limits<float>::infinity(), 2.0).ok());
  written.push_back({-7, 2.0, {{"weird", std::numeric_limits<float>::infinity()}}});
  ASSERT_TRUE(writer.Flush().ok());

  SubprocessOptions options;
  options.argv = {"/usr/bin/python3", HPOD_TRAIN_TRAINER_TESTDATA "/tfevents_decode.py",
                  writer.path(), HPOD_TRAIN_TRAINER_TESTDATA "/tfevents_subset.proto"};
  options.timeout = std::chrono::milliseconds(15000);
  auto result = RunCommand(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->exit_code, 0) << result->stderr_data;
  const nlohmann::json decoded = nlohmann::json::parse(result->stdout_data);

  ASSERT_EQ(decoded.size(), written.size() + 1);
  EXPECT_EQ(decoded[0]["file_version"], "brain.Event:2");
  EXPECT_EQ(decoded[0]["wall_time"].get<double>(), 1700000000.0);
  for (size_t i = 0; i < written.size(); ++i) {
    const nlohmann::json& e = decoded[i + 1];
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(e["step"].get<int64_t>(), written[i].step);
    EXPECT_EQ(e["wall_time"].get<double>(), written[i].wall_time);
    ASSERT_EQ(e["values"].size(), written[i].values.size());
    for (size_t k = 0; k < written[i].values.size(); ++k) {
      EXPECT_EQ(e["values"][k][0].get<std::string>(), written[i].values[k].first);
      const double want = written[i].values[k].second;
      if (std::isinf(want)) {
        EXPECT_EQ(e["values"][k][1], "inf");  // the decoder's spelling of non-finite values
      } else {
        EXPECT_EQ(e["values"][k][1].get<double>(), want);  // float32 exactly
        EXPECT_EQ(std::signbit(e["values"][k][1].get<double>()), std::signbit(want));
      }
    }
  }
}

TEST(EventWriterTest, ConcurrentWritersKeepRecordsWhole) {
  TempDir dir;
  auto created = EventWriter::Create(dir.path());
  ASSERT_TRUE(created.ok());
  EventWriter& writer = **created;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        EXPECT_TRUE(writer.AddScalar("t" + std::to_string(t), i, static_cast<float>(i), i).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  // Walk the framing: every record's CRCs check out and the count is exact.
  const std::string bytes = ReadFile(writer.path());
  size_t pos = 0, records = 0;
  while (pos < bytes.size()) {
    ASSERT_LE(pos + 12, bytes.size());
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[pos + i]);
    ASSERT_LE(pos + 16 + len, bytes.size());
    EXPECT_EQ(bytes.substr(pos, 16 + len), FrameRecord(bytes.substr(pos + 12, len)));
    pos += 16 + len;
    ++records;
  }
  EXPECT_EQ(records, 1u + 4 * 200);
}

}  // namespace
}  // namespace hpod::train
