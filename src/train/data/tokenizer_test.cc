#include "hpod/train/data/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "hpod/base/crypto.h"
#include "hpod/train/data/corpus.h"
#include "hpod/train/data/shard.h"
#include "hpod/train/data/test_util.h"
#include "hpod/train/data/tokenize_files.h"

namespace hpod::train::data {
namespace {

using ::hpod::train::data::testing::Slurp;
using ::hpod::train::data::testing::Spit;
using ::hpod::train::data::testing::TempDir;
using ::testing::HasSubstr;

constexpr int kVocab = 400;  // 259 byte/special pieces + ~60 characters + merges

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One tokenizer trained on the committed KJV sample (Genesis 1-9, 1 Samuel 1,
// Song of Solomon 1), shared by the tests of this suite.
class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string raw = Slurp(std::string(HPOD_DATA_TESTDATA) + "/kjv_raw_sample.txt");
    ASSERT_FALSE(raw.empty());
    text_ = new std::string(CleanKjv(raw).text);
    Spit(Path("kjv.txt"), *text_);
    Status s = TrainTokenizer({Path("kjv.txt")}, kVocab, Path("tok"), 2);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete text_;
  }
  static std::string Path(const std::string& name) { return dir_->Path(name); }

  static TempDir* dir_;
  static std::string* text_;
};
TempDir* TokenizerTest::dir_ = nullptr;
std::string* TokenizerTest::text_ = nullptr;

TEST_F(TokenizerTest, TrainsALlama2cStyleBpeModel) {
  EXPECT_TRUE(std::filesystem::exists(Path("tok.model")));
  EXPECT_TRUE(std::filesystem::exists(Path("tok.vocab")));
  auto tok = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->vocab_size(), kVocab);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  // byte_fallback: <0x00>.. pieces follow the specials, so any byte encodes.
  auto snowman = tok->Encode("\xe2\x98\x83");
  ASSERT_TRUE(snowman.ok());
  EXPECT_EQ(snowman->size(), 4u);  // "▁" + three byte pieces
  // split_digits: every digit is its own piece.
  auto digits = tok->Encode("1234");
  ASSERT_TRUE(digits.ok());
  EXPECT_EQ(digits->size(), 5u);  // "▁" + 4 digits
  // Merges learnt from the sample make common words single pieces.
  auto the = tok->Encode("the");
  ASSERT_TRUE(the.ok());
  EXPECT_EQ(the->size(), 1u);
}

TEST_F(TokenizerTest, EncodeDecodeRoundTripsEveryVerseAndUnseenText) {
  auto tok = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(tok.ok());
  const auto verses = Lines(*text_);
  ASSERT_EQ(verses.size(), 280u);
  int64_t tokens = 0, bytes = 0;
  for (const std::string& verse : verses) {
    auto ids = tok->Encode(verse);
    ASSERT_TRUE(ids.ok());
    tokens += static_cast<int64_t>(ids->size());
    bytes += static_cast<int64_t>(verse.size());
    auto back = tok->Decode(*ids);
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(*back, verse);
  }
  // A 400-piece BPE compresses English to ~2 bytes per token (the reference
  // measured 2.02 at vocab 512 on the full corpus).
  EXPECT_GT(static_cast<double>(bytes) / tokens, 1.6);
  EXPECT_LT(static_cast<double>(bytes) / tokens, 3.0);
  for (const std::string text :
       {"Quixotic zebras jump over 42 lazy dogs!", "Caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 3.14",
        "tabs\tand {braces} [x] <y> ~ ` | \\"}) {
    auto ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok());
    auto back = tok->Decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

TEST_F(TokenizerTest, IdIsTheSha256OfTheModelAndTrainingIsDeterministic) {
  auto tok = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->id(), "sha256:" + HexEncode(Sha256(Slurp(Path("tok.model")))));
  EXPECT_EQ(tok->id().size(), 7u + 64u);
  auto again = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), tok->id());

  // Retraining with the same options gives the same bytes, hence the same id.
  // (The .model records its training options, input paths and prefix included,
  // so only an identical command reproduces the id.)
  const std::string first = Slurp(Path("tok.model"));
  ASSERT_TRUE(TrainTokenizer({Path("kjv.txt")}, kVocab, Path("tok"), 2).ok());
  EXPECT_EQ(Slurp(Path("tok.model")), first);
  auto retrained = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(retrained.ok());
  EXPECT_EQ(retrained->id(), tok->id());
}

TEST_F(TokenizerTest, ErrorsAreValues) {
  auto missing = Tokenizer::Load(Path("nope.model"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  Spit(Path("garbage.model"), "this is not a protobuf \xff\xff\xff\xff");
  auto garbage = Tokenizer::Load(Path("garbage.model"));
  EXPECT_EQ(garbage.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(garbage.status().message(), HasSubstr("garbage.model"));

  auto tok = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(tok.ok());
  auto bad = tok->Decode(std::vector<int32_t>{5, kVocab});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("id 400 at position 1"));

  Status too_small = TrainTokenizer({Path("kjv.txt")}, 100, Path("small"), 1);
  EXPECT_EQ(too_small.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_small.message(), HasSubstr("train tokenizer"));
  Status no_input = TrainTokenizer({Path("absent.txt")}, kVocab, Path("x"), 1);
  EXPECT_EQ(no_input.code(), StatusCode::kNotFound);
  EXPECT_THAT(no_input.message(), HasSubstr("absent.txt"));
}

TEST_F(TokenizerTest, TokenizeFilesIsDeterministicAcrossThreadsAndSplitsByDocument) {
  auto tok = Tokenizer::Load(Path("tok.model"));
  ASSERT_TRUE(tok.ok());
  TokenizeOptions o;
  o.inputs = {Path("kjv.txt")};
  o.output = Path("one.bin");
  o.val_output = Path("one-val.bin");
  o.val_fraction = 0.1;
  o.threads = 1;
  o.chunk_bytes = 2000;  // many chunks
  int calls = 0;
  auto one = TokenizeFiles(*tok, o, [&](const TokenizeStats&) { ++calls; });
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_GT(calls, 5);
  o.output = Path("three.bin");
  o.val_output = Path("three-val.bin");
  o.threads = 3;
  auto three = TokenizeFiles(*tok, o, nullptr);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(Slurp(Path("one.bin")), Slurp(Path("three.bin")));
  EXPECT_EQ(Slurp(Path("one-val.bin")), Slurp(Path("three-val.bin")));

  EXPECT_EQ(one->documents, 280);
  EXPECT_EQ(one->train_documents + one->val_documents, 280);
  EXPECT_GT(one->val_documents, 10);  // ~28 expected
  EXPECT_LT(one->val_documents, 50);
  EXPECT_EQ(one->bytes_read, static_cast<int64_t>(text_->size()));

  // The shards decode back to the verses, each after one BOS, in order.
  auto train = Shard::Open(Path("one.bin"), true);
  auto val = Shard::Open(Path("one-val.bin"), true);
  ASSERT_TRUE(train.ok() && val.ok());
  EXPECT_EQ(train->vocab_size(), static_cast<uint32_t>(kVocab));
  EXPECT_EQ(train->num_tokens(), one->train_tokens);
  EXPECT_EQ(val->num_tokens(), one->val_tokens);
  std::vector<std::string> decoded;
  for (const Shard* s : {&*train, &*val}) {
    std::vector<int32_t> doc;
    for (int64_t i = 0; i <= s->num_tokens(); ++i) {
      if (i == s->num_tokens() || s->token(i) == tok->bos_id()) {
        if (i > 0) decoded.push_back(*tok->Decode(doc));
        doc.clear();
      } else {
        doc.push_back(s->token(i));
      }
    }
    ASSERT_EQ(s->token(0), tok->bos_id());
  }
  ASSERT_EQ(decoded.size(), 280u);
  std::vector<std::string> verses = Lines(*text_);
  std::sort(decoded.begin(), decoded.end());
  std::sort(verses.begin(), verses.end());
  EXPECT_EQ(decoded, verses);

  // No split: one shard with every document.
  TokenizeOptions all;
  all.inputs = {Path("kjv.txt")};
  all.output = Path("all.bin");
  auto whole = TokenizeFiles(*tok, all, nullptr);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->train_documents, 280);
  EXPECT_EQ(whole->tokens, one->tokens);

  all.val_output = Path("v.bin");
  all.val_fraction = 1.0;
  EXPECT_EQ(TokenizeFiles(*tok, all, nullptr).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hpod::train::data
