#include "hpod/train/model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "hpod/base/subprocess.h"

namespace hpod::train::model {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Must match formula() in tests/tools/safetensors_np.py: an integer hash made
// into fp32 bits with exponents 2^-30 .. 2^20 (F16 zeros, subnormals, normals, inf).
float FormulaValue(uint32_t seed, uint32_t i) {
  uint32_t h = i * 2654435761u + seed * 40503u + 12345u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  const uint32_t exp = 97 + ((h >> 23) & 0x3Fu) % 51;
  return std::bit_cast<float>((h & 0x80000000u) | (exp << 23) | (h & 0x7FFFFFu));
}

std::vector<float> Formula(uint32_t seed, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = FormulaValue(seed, static_cast<uint32_t>(i));
  return v;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpod_safetensors_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // A file with the given header text (length prefix `header_len`, or the
  // text's length when negative) followed by `body`.
  std::string Raw(const std::string& name, const std::string& header, const std::string& body,
                  int64_t header_len = -1) {
    std::string path = Path(name);
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << body;
    return path;
  }

  std::string dir_;
};

TEST(DTypeConversionTest, F16KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);    // largest half
  EXPECT_EQ(F32ToF16(65519.996f), 0x7bff);  // just below the halfway point
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);    // tie → even → inf
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie → even (0)
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie → even (2)
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie → even
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie → even (up)
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -150)), 0x0000);            // fp32 subnormal
  uint16_t nan = F32ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x83ff), -1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
}

TEST(DTypeConversionTest, EveryHalfAndBfloatPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f16 = F16ToF32(x);
    const float bf16 = BF16ToF32(x);
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f16)))) << h;
    } else {
      ASSERT_EQ(F32ToF16(f16), x) << h;
    }
    if (std::isnan(bf16)) {
      EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(bf16)))) << h;
    } else {
      ASSERT_EQ(F32ToBF16(bf16), x) << h;
    }
  }
}

TEST(DTypeConversionTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie → even (down)
  EXPECT_EQ(F32ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie → even (up)
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(F32ToBF16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(DTypeConversionTest, ParseDType) {
  EXPECT_EQ(*ParseDType("bf16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("float16"), DType::kF16);
  EXPECT_EQ(*ParseDType("FP32"), DType::kF32);
  auto bad = ParseDType("int8");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'int8'"));
}

TEST_F(SafetensorsTest, F32RoundTripIsExact) {
  std::vector<float> a = Formula(1, 3 * 5 * 7);
  a[0] = std::numeric_limits<float>::infinity();
  a[1] = -0.0f;
  a[2] = std::numeric_limits<float>::denorm_min();
  a[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> b = Formula(2, 1000);
  float scalar = 1.25f;
  std::vector<TensorToWrite> tensors = {{"a", {3, 5, 7}, a.data()},
                                        {"b", {1000}, b.data()},
                                        {"empty", {0, 4}, nullptr},
                                        {"scalar", {}, &scalar}};
  const std::string path = Path("f32.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors, DType::kF32, {{"format", "pt"}}).ok());

  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata(), nlohmann::json({{"format", "pt"}}));
  ASSERT_EQ(f->entries().size(), 4u);
  EXPECT_EQ(f->entries()[0].name, "a");  // data order = write order
  EXPECT_EQ(f->entries()[0].shape, (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(f->entries()[0].dtype, DType::kF32);
  EXPECT_EQ(f->entries()[0].begin, 0);
  EXPECT_EQ(f->entries()[0].end, 105 * 4);
  std::vector<float> got(a.size());
  ASSERT_TRUE(f->ReadF32("a", got).ok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(Bits(got[i]), Bits(a[i])) << i;
  got.resize(b.size());
  ASSERT_TRUE(f->ReadF32("b", got).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), b.data(), b.size() * 4));
  float s = 0;
  ASSERT_TRUE(f->ReadF32("scalar", std::span<float>(&s, 1)).ok());
  EXPECT_EQ(s, 1.25f);
  EXPECT_EQ(f->Find("empty")->numel, 0);
  EXPECT_TRUE(f->ReadF32("empty", std::span<float>()).ok());

  // Header padded to 8; no temporary file left behind.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), 8 + header_len + (105 + 1000 + 1) * 4);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

TEST_F(SafetensorsTest, Bf16AndF16RoundTripWithinRounding) {
  std::vector<float> v = Formula(3, 4096);
  // Values each dtype represents exactly come back unchanged.
  std::vector<float> exact = {0.0f,
                              1.0f,
                              -2.5f,
                              0.15625f,
                              1024.0f,
                              -65504.0f,
                              std::ldexp(1.0f, -24),
                              std::ldexp(3.0f, -20)};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    std::vector<TensorToWrite> tensors = {{"v", {64, 64}, v.data()}, {"exact", {8}, exact.data()}};
    const std::string path = Path("t.safetensors");
    ASSERT_TRUE(WriteSafetensors(path, tensors, dtype, {}).ok());
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->Find("v")->dtype, dtype);
    EXPECT_EQ(f->Find("v")->end - f->Find("v")->begin, 4096 * 2);
    std::vector<float> got(v.size());
    ASSERT_TRUE(f->ReadF32("v", got).ok());
    const bool bf16 = dtype == DType::kBF16;
    int checked_relative = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = bf16 ? BF16ToF32(F32ToBF16(v[i])) : F16ToF32(F32ToF16(v[i]));
      ASSERT_EQ(Bits(got[i]), Bits(want)) << i;
      const float a = std::fabs(v[i]);
      if (bf16 || (a >= std::ldexp(1.0f, -14) && a <= 65504.0f)) {  // normal range
        EXPECT_LE(std::fabs(got[i] - v[i]), a * std::ldexp(1.0f, bf16 ? -8 : -11)) << i;
        ++checked_relative;
      }
    }
    EXPECT_GT(checked_relative, 1000);
    std::vector<float> e(exact.size());
    ASSERT_TRUE(f->ReadF32("exact", e).ok());
    for (size_t i = 0; i < exact.size(); ++i) {
      if (bf16 && (i == 5 || i == 6 || i == 7)) continue;  // not bf16-representable
      EXPECT_EQ(e[i], exact[i]) << i;
    }
    EXPECT_EQ(e[0], 0.0f);
  }
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float x[2] = {1, 2};
  const std::string path = Path("bad.safetensors");
  std::vector<TensorToWrite> dup = {{"a", {1}, x}, {"a", {1}, x + 1}};
  Status s = WriteSafetensors(path, dup, DType::kF32, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  std::vector<TensorToWrite> reserved = {{"__metadata__", {1}, x}};
  EXPECT_EQ(WriteSafetensors(path, reserved, DType::kF32, {}).code(), StatusCode::kInvalidArgument);
  std::vector<TensorToWrite> negative = {{"n", {-1, 2}, x}};
  EXPECT_THAT(WriteSafetensors(path, negative, DType::kF32, {}).message(),
              HasSubstr("tensor n has invalid shape [-1, 2]"));
  std::vector<TensorToWrite> ok = {{"a", {2}, x}};
  EXPECT_EQ(WriteSafetensors(path, ok, DType::kOther, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(dir_ + "/missing/dir/x.safetensors", ok, DType::kF32, {}).code(),
            StatusCode::kInternal);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 0);
}

TEST_F(SafetensorsTest, MalformedFilesGiveClearErrors) {
  struct Case {
    std::string name;
    std::string path;
    StatusCode code;
    std::string message;
  };
  const std::string entry_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<Case> cases = {
      {"short", Raw("short", "", "", 0), StatusCode::kDataLoss, "header is not a JSON object"},
      {"huge header", Raw("huge", "{}", "", 200'000'000), StatusCode::kDataLoss,
       "exceeds the 100000000 byte limit"},
      {"truncated header", Raw("trunc", "{}", "", 64), StatusCode::kDataLoss,
       "header length 64 exceeds the file's 10 bytes (truncated?)"},
      {"bad json", Raw("badjson", "{\"a\": [1,", ""), StatusCode::kDataLoss,
       "header is not a JSON object"},
      {"array", Raw("array", "[1,2]", ""), StatusCode::kDataLoss, "header is not a JSON object"},
      {"out of range", Raw("range", "{" + entry_a + "}", "1234"), StatusCode::kDataLoss,
       "tensor a: data_offsets [0,8] exceed the 4 byte data section"},
      {"overlap",
       Raw("overlap", "{" + entry_a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           std::string(12, '\0')),
       StatusCode::kDataLoss, "tensors a and b overlap"},
      {"size mismatch",
       Raw("size", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
           std::string(8, '\0')),
       StatusCode::kDataLoss, "tensor a: F32 shape [3] needs 12 bytes but data_offsets span 8"},
      {"unknown dtype", Raw("q4", R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,1]}})", "x"),
       StatusCode::kInvalidArgument, "tensor w has unknown dtype \"Q4\""},
      {"negative dim", Raw("neg", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
       StatusCode::kDataLoss, "tensor a: shape [-1] is invalid"},
      {"huge dims",
       Raw("dims",
           R"({"a":{"dtype":"F32","shape":[281474976710656,281474976710656],"data_offsets":[0,0]}})",
           ""),
       StatusCode::kDataLoss, "tensor a: shape"},
      {"no offsets", Raw("nooff", R"({"a":{"dtype":"F32","shape":[1]}})", "1234"),
       StatusCode::kDataLoss, "tensor a: data_offsets must be [begin, end]"},
      {"reversed offsets",
       Raw("rev", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "1234"),
       StatusCode::kDataLoss, "tensor a: data_offsets [4,0] are invalid"},
      {"metadata", Raw("meta", R"({"__metadata__":{"step":3}})", ""), StatusCode::kDataLoss,
       "__metadata__ value for 'step' is not a string"},
      {"missing", Path("nope.safetensors"), StatusCode::kNotFound, "no such file"},
  };
  {
    std::ofstream(Path("tiny"), std::ios::binary) << "abc";
    cases.push_back({"tiny", Path("tiny"), StatusCode::kDataLoss, "3 bytes is too short"});
  }
  for (const Case& c : cases) {
    auto f = SafetensorsFile::Open(c.path);
    ASSERT_FALSE(f.ok()) << c.name;
    EXPECT_EQ(f.status().code(), c.code) << c.name << ": " << f.status().ToString();
    EXPECT_THAT(f.status().message(), HasSubstr(c.path)) << c.name;
    EXPECT_THAT(f.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(f.status().message(), Not(HasSubstr("\n"))) << c.name;
  }
}

TEST_F(SafetensorsTest, UnsupportedDtypeAndBadReadsAreErrors) {
  std::string path = Raw("i64",
                         R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                         R"("x":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                         std::string(20, '\0'));
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();  // listing works; reading I64 does not
  EXPECT_EQ(f->Find("ids")->dtype, DType::kOther);
  EXPECT_EQ(f->Find("ids")->dtype_name, "I64");
  std::vector<float> out(2);
  Status s = f->ReadF32("ids", out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), path + ": tensor ids has dtype I64; hpod-train reads F32, BF16, F16");
  s = f->ReadF32("x", out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor x has 1 elements, expected 2"));
  EXPECT_EQ(f->ReadF32("nope", out).code(), StatusCode::kNotFound);
}

// Random corruptions of a valid file: Open either fails cleanly or yields
// entries that ReadF32 can read in full (ASan builds catch stray reads).
TEST_F(SafetensorsTest, CorruptedFilesNeverCrash) {
  std::vector<float> a = Formula(5, 24), b = Formula(6, 10);
  std::vector<TensorToWrite> tensors = {{"alpha", {4, 6}, a.data()}, {"beta", {10}, b.data()}};
  const std::string good = Path("good.safetensors");
  ASSERT_TRUE(WriteSafetensors(good, tensors, DType::kBF16, {{"format", "pt"}}).ok());
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(42);
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string m = bytes;
    switch (iter % 3) {
      case 0:  // flip a few bytes anywhere, mostly in the header
        for (int k = 0; k < 1 + iter % 4; ++k) {
          m[rng() % std::min<size_t>(m.size(), 8 + 200)] = static_cast<char>(rng());
        }
        break;
      case 1:  // truncate
        m.resize(rng() % m.size());
        break;
      case 2: {  // replace a digit in the header with another
        size_t pos = 8 + rng() % (m.size() - 8);
        if (m[pos] >= '0' && m[pos] <= '9') m[pos] = static_cast<char>('0' + rng() % 10);
        m[pos % 8] = static_cast<char>(rng() % 3 == 0 ? rng() : m[pos % 8]);
        break;
      }
    }
    // A fresh file each time: truncating a just-mapped file stalls on some filesystems.
    const std::string path = Path("mutant" + std::to_string(iter));
    std::ofstream(path, std::ios::binary) << m;
    auto f = SafetensorsFile::Open(path);
    std::filesystem::remove(path);
    if (!f.ok()) {
      ++rejected;
      EXPECT_THAT(f.status().message(), Not(HasSubstr("\n")));
      continue;
    }
    ++opened;
    for (const auto& e : f->entries()) {
      std::vector<float> out(static_cast<size_t>(e.numel));
      Status s = f->ReadF32(e.name, out);
      if (e.dtype == DType::kOther) {
        EXPECT_FALSE(s.ok());
      } else {
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    }
  }
  EXPECT_GT(opened, 100);
  EXPECT_GT(rejected, 1000);
}

// --- numpy differential (tests/tools/safetensors_np.py, Debian's python3) ---

class SafetensorsNumpyTest : public SafetensorsTest {
 protected:
  void SetUp() override {
    SafetensorsTest::SetUp();
    SubprocessOptions o;
    o.argv = {"/usr/bin/python3", "-c", "import numpy"};
    o.timeout = std::chrono::seconds(30);
    auto r = RunCommand(o);
    if (!r.ok() || r->exit_code != 0) {
      GTEST_SKIP() << "/usr/bin/python3 with numpy (python3-numpy) is not installed";
    }
  }
  SubprocessResult Python(std::vector<std::string> args) {
    SubprocessOptions o;
    o.argv = {"/usr/bin/python3", HPOD_SAFETENSORS_NP};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout = std::chrono::seconds(60);
    o.merge_stderr = true;
    o.env["PYTHONDONTWRITEBYTECODE"] = "1";
    auto r = RunCommand(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : SubprocessResult{};
  }
};

TEST_F(SafetensorsNumpyTest, NumpyReadsWhatWeWrite) {
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t seed;
  };
  const std::vector<T> specs = {{"model.embed_tokens.weight", {3, 5, 7}, 11},
                                {"b", {1000}, 12},
                                {"empty", {0, 4}, 13},
                                {"scalar", {}, 14},
                                {"wide", {64, 65}, 15}};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    std::vector<std::vector<float>> values;
    std::vector<TensorToWrite> tensors;
    nlohmann::json spec = {{"metadata", {{"format", "pt"}, {"step", "7"}}}, {"tensors", {}}};
    for (const T& t : specs) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      values.push_back(Formula(t.seed, static_cast<size_t>(n)));
      tensors.push_back({t.name, t.shape, values.back().data()});
      spec["tensors"][t.name] = {{"dtype", DTypeName(dtype)}, {"shape", t.shape}, {"seed", t.seed}};
    }
    const std::string path = Path("ours.safetensors");
    ASSERT_TRUE(WriteSafetensors(path, tensors, dtype, {{"format", "pt"}, {"step", "7"}}).ok());
    SubprocessResult r = Python({"check", path, spec.dump()});
    EXPECT_EQ(r.exit_code, 0) << r.stdout_data;
    EXPECT_THAT(r.stdout_data, HasSubstr("OK 5 tensors"));
  }
}

TEST_F(SafetensorsNumpyTest, WeReadWhatNumpyWrites) {
  const std::string path = Path("numpy.safetensors");
  SubprocessResult r = Python({"write", path, "21"});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_data;
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata().value("writer", ""), "numpy");
  EXPECT_EQ(f->entries().size(), 7u);

  auto read = [&](const std::string& name, size_t n) {
    std::vector<float> out(n);
    Status s = f->ReadF32(name, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  std::vector<float> f32 = read("f32", 105);
  for (uint32_t i = 0; i < 105; ++i) ASSERT_EQ(Bits(f32[i]), Bits(FormulaValue(21, i))) << i;
  EXPECT_EQ(f->Find("f32")->shape, (std::vector<int64_t>{3, 5, 7}));
  std::vector<float> bf16 = read("bf16", 132);
  for (uint32_t i = 0; i < 132; ++i) {
    ASSERT_EQ(Bits(bf16[i]), Bits(BF16ToF32(F32ToBF16(FormulaValue(22, i))))) << i;
  }
  // numpy's astype(float16) and ours agree on every value, incl. overflow and subnormals.
  std::vector<float> f16 = read("f16", 300);
  for (uint32_t i = 0; i < 300; ++i) {
    ASSERT_EQ(Bits(f16[i]), Bits(F16ToF32(F32ToF16(FormulaValue(23, i)))))
        << i << " " << FormulaValue(23, i);
  }
  // Every half bit pattern widens exactly as numpy widens it (NaN payloads too).
  std::vector<float> all = read("f16_all", 65536);
  std::vector<float> all_np = read("f16_all_f32", 65536);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(Bits(all[i]), Bits(all_np[i])) << i;
  EXPECT_EQ(read("scalar", 1)[0], 1.5f);
  std::vector<float> ids(3);
  EXPECT_THAT(f->ReadF32("i64", ids).message(), HasSubstr("has dtype I64"));
}

}  // namespace
}  // namespace hpod::train::model
