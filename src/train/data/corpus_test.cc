#include "hpod/train/data/corpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "hpod/train/data/test_util.h"

namespace hpod::train::data {
namespace {

using ::hpod::train::data::testing::Slurp;
using ::hpod::train::data::testing::TempDir;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(CleanKjvTest, OneVersePerLineWithoutHeadingsOrNumbers) {
  const std::string raw = Slurp(std::string(HPOD_DATA_TESTDATA) + "/kjv_raw_sample.txt");
  const CleanedText kjv = CleanKjv(raw);
  const auto lines = Lines(kjv.text);
  // Genesis 1-9 (31+25+24+26+32+22+24+22+29) + 1 Samuel 1 (28) + Song of Solomon 1 (17).
  ASSERT_EQ(kjv.documents, 280);
  ASSERT_EQ(lines.size(), 280u);
  EXPECT_EQ(lines[0], "In the beginning God created the heaven and the earth.");
  // Gen 1:2 is wrapped over two lines in the raw output.
  EXPECT_EQ(lines[1],
            "And the earth was without form, and void; and darkness was upon the face of the "
            "deep. And the Spirit of God moved upon the face of the waters.");
  EXPECT_EQ(lines[235],
            "Now there was a certain man of Ramathaimzophim, of mount Ephraim, and his name was "
            "Elkanah, the son of Jeroham, the son of Elihu, the son of Tohu, the son of Zuph, an "
            "Ephrathite:");
  EXPECT_EQ(lines[263], "The song of songs, which is Solomon's.");
  for (const std::string& line : lines) {
    ASSERT_FALSE(line.empty());
    ASSERT_FALSE(isdigit(static_cast<unsigned char>(line[0]))) << line;  // no verse numbers
    ASSERT_NE(line.front(), ' ');
    ASSERT_NE(line.back(), ' ');
    ASSERT_EQ(line.find("  "), std::string::npos) << line;
    ASSERT_NE(line, "Genesis 2");
  }
  EXPECT_EQ(kjv.text.find("Song of Solomon 1"), std::string::npos);
  EXPECT_EQ(kjv.text.find("1 Samuel 1"), std::string::npos);
}

TEST(JoinParagraphsTest, JoinsWrappedLinesAndDropsBlanks) {
  const CleanedText out = JoinParagraphs(
      "SENSE AND SENSIBILITY\n\nby Jane Austen\n\n\n\nCHAPTER 1\n\n\nThe family of Dashwood "
      "had long\nbeen settled in Sussex.  \r\n   Their estate was large.\n\n\n");
  EXPECT_EQ(out.documents, 4);
  EXPECT_EQ(out.text,
            "SENSE AND SENSIBILITY\nby Jane Austen\nCHAPTER 1\nThe family of Dashwood had long "
            "been settled in Sussex. Their estate was large.\n");
  EXPECT_EQ(JoinParagraphs("").documents, 0);
  EXPECT_EQ(JoinParagraphs("no newline").text, "no newline\n");
}

// The real extraction, when the Debian packages are installed (~1.5 s).
TEST(ExtractCorpusTest, ExtractsTheKjvAndAustenFromDebianPackages) {
  if (::access("/usr/lib/bible.data", R_OK) != 0) GTEST_SKIP() << "bible-kjv is not installed";
  TempDir dir;
  CorpusOptions o;
  o.output_dir = dir.Path("corpus");
  std::vector<std::string> notes;
  o.note = [&](const std::string& n) { notes.push_back(n); };
  auto r = ExtractCorpus(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kjv_verses, 31102);
  EXPECT_NEAR(static_cast<double>(r->kjv_bytes), 4.14e6, 0.05e6);
  const auto verses = Lines(Slurp(r->kjv_path));
  ASSERT_EQ(verses.size(), 31102u);
  EXPECT_EQ(verses.back(), "The grace of our Lord Jesus Christ be with you all. Amen.");
  ASSERT_FALSE(notes.empty());
  EXPECT_THAT(notes[0], HasSubstr("31102 verses"));
  if (r->austen_path.empty()) {
    EXPECT_THAT(notes.back(), HasSubstr("scripts/install-deps.sh --corpus"));
  } else {
    const std::string austen = Slurp(r->austen_path);
    EXPECT_NEAR(static_cast<double>(r->austen_bytes), 3.9e6, 0.3e6);
    EXPECT_EQ(austen.rfind("SENSE AND SENSIBILITY\n", 0), 0u);
    EXPECT_NE(austen.find("\xc2\xa3"), std::string::npos) << "UTF-8 pound signs, not <U+00A3>";
    EXPECT_NE(austen.find("\nNORTHANGER ABBEY\n"), std::string::npos) << "books stay apart";
  }
}

}  // namespace
}  // namespace hpod::train::data
