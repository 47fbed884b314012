// Runs the hpod-data binary: train-tokenizer → tokenize → info, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/subprocess.h"
#include "hpod/train/data/corpus.h"
#include "hpod/train/data/test_util.h"

namespace hpod::train::data {
namespace {

using ::hpod::train::data::testing::Slurp;
using ::hpod::train::data::testing::Spit;
using ::hpod::train::data::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

SubprocessResult RunHpodData(std::vector<std::string> args) {
  SubprocessOptions o;
  o.argv = {HPOD_DATA_BINARY};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.timeout = std::chrono::seconds(60);
  auto r = RunCommand(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : SubprocessResult{};
}

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(HpodDataCliTest, TrainTokenizeInfo) {
  TempDir dir;
  Spit(dir.Path("kjv.txt"),
       CleanKjv(Slurp(std::string(HPOD_DATA_TESTDATA) + "/kjv_raw_sample.txt")).text);

  auto train = RunHpodData({"train-tokenizer", "--input", dir.Path("kjv.txt"), "--vocab-size",
                            "400", "--output", dir.Path("tok"), "--threads", "2"});
  ASSERT_EQ(train.exit_code, 0) << train.stderr_data;
  EXPECT_THAT(train.stdout_data, HasSubstr("vocab 400"));
  EXPECT_THAT(train.stdout_data, HasSubstr("id sha256:"));
  EXPECT_THAT(train.stderr_data, Not(HasSubstr("trainer_interface.cc")))
      << "sentencepiece's INFO log stays off without --verbose";

  auto tok = RunHpodData({"tokenize", "--tokenizer", dir.Path("tok.model"), "--input",
                          dir.Path("kjv.txt"), "--output", dir.Path("train.bin"), "--val-output",
                          dir.Path("val.bin"), "--val-fraction", "0.1", "--threads", "2"});
  ASSERT_EQ(tok.exit_code, 0) << tok.stderr_data;
  EXPECT_THAT(tok.stdout_data, HasSubstr("280 documents"));

  auto info = RunHpodData({"info", dir.Path("train.bin"), "--output", "json"});
  ASSERT_EQ(info.exit_code, 0) << info.stderr_data;
  const auto j = nlohmann::json::parse(info.stdout_data);
  EXPECT_EQ(j["vocab_size"], 400);
  EXPECT_EQ(j["token_bytes"], 2);
  EXPECT_EQ(j["checksum_ok"], true);
  const int64_t num_tokens = j["num_tokens"];
  const int64_t file_bytes = j["bytes"];
  EXPECT_EQ(file_bytes, 64 + 2 * num_tokens);
  EXPECT_THAT(tok.stdout_data, HasSubstr("train.bin: "));
  EXPECT_THAT(tok.stdout_data, HasSubstr(std::to_string(num_tokens) + " tokens"));
  const double h = j["unigram_entropy_nats"];
  EXPECT_GT(h, 3.0);  // a 400-piece vocabulary on English: ~4.5-5.5 nats
  EXPECT_LT(h, std::log(400.0));

  auto text = RunHpodData({"info", dir.Path("val.bin")});
  ASSERT_EQ(text.exit_code, 0) << text.stderr_data;
  EXPECT_THAT(text.stdout_data, HasSubstr("(ok)"));
  EXPECT_THAT(text.stdout_data, HasSubstr("unigram entropy"));

  // A flipped token byte: info still prints the header, then fails in one line.
  std::string bytes = Slurp(dir.Path("train.bin"));
  bytes[100] ^= 1;
  Spit(dir.Path("bad.bin"), bytes);
  auto bad = RunHpodData({"info", dir.Path("bad.bin")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stdout_data, HasSubstr("MISMATCH"));
  EXPECT_EQ(CountLines(bad.stderr_data), 1) << bad.stderr_data;
  EXPECT_THAT(bad.stderr_data, HasSubstr("bad.bin is corrupt: checksum mismatch"));
}

TEST(HpodDataCliTest, ErrorsAreOneLineAndHelpExplainsOptions) {
  auto help = RunHpodData({"tokenize", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* opt : {"--tokenizer", "--input", "--output", "--val-output", "--val-fraction",
                          "--val-seed", "--threads"}) {
    EXPECT_THAT(help.stdout_data, HasSubstr(opt));
  }
  auto missing = RunHpodData({"tokenize", "--input", "/nonexistent.txt"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(CountLines(missing.stderr_data), 1) << missing.stderr_data;
  EXPECT_THAT(missing.stderr_data, HasSubstr("hpod-data: "));

  auto none = RunHpodData({});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(CountLines(none.stderr_data), 1) << none.stderr_data;

  TempDir dir;
  Spit(dir.Path("short.bin"), "HPODTOK");
  auto corrupt = RunHpodData({"info", dir.Path("short.bin")});
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_EQ(CountLines(corrupt.stderr_data), 1);
  EXPECT_THAT(corrupt.stderr_data, HasSubstr("short.bin is corrupt"));

  auto small = RunHpodData({"train-tokenizer", "--input", HPOD_DATA_TESTDATA "/kjv_raw_sample.txt",
                            "--vocab-size", "300", "--output", dir.Path("t")});
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_EQ(CountLines(small.stderr_data), 2) << "the 'training…' line and one error line";
}

}  // namespace
}  // namespace hpod::train::data
