// The real training corpus, extracted from Debian packages (nothing is
// downloaded): the King James Bible from bible-kjv and Jane Austen's six novels
// from r-cran-janeaustenr (training-building-blocks.md §9).
//
// Both are written as one document per line, the form `hpod-data tokenize`
// expects (one BOS before each line): a KJV verse per line, an Austen
// paragraph per line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::train::data {

// What ExtractCorpus and the cleaners produced.
struct CleanedText {
  std::string text;       // one document per line, each ending in '\n'
  int64_t documents = 0;  // lines in `text`
};

// Cleans the output of `bible "Gen1:1-Rev22:21"`: drops the chapter headings
// ("Genesis 1", "1 Samuel 3", "Song of Solomon 2": the first line after a blank
// line that is not a verse), strips the verse numbers ("  12 And God…") and
// joins the ~80-column continuation lines with a space, one verse per line.
// Pure; thread-safe.
CleanedText CleanKjv(std::string_view raw);

// Joins wrapped prose into one paragraph per line: runs of non-blank lines are
// joined with single spaces (leading/trailing blanks trimmed); blank lines end
// a paragraph and are dropped. Used for Austen. Pure; thread-safe.
CleanedText JoinParagraphs(std::string_view raw);

struct CorpusOptions {
  std::string output_dir;  // created if missing; gets kjv.txt and austen.txt
  bool austen = true;      // extract Austen when janeaustenr is installed
  // Called with one line of progress or a note ("skipping Austen: …").
  std::function<void(const std::string&)> note;
};

struct CorpusResult {
  std::string kjv_path;
  int64_t kjv_verses = 0;
  int64_t kjv_bytes = 0;
  std::string austen_path;  // empty when skipped
  int64_t austen_paragraphs = 0;
  int64_t austen_bytes = 0;
};

// Runs `bible` and (optionally) `Rscript` and writes the cleaned texts
// atomically. FailedPrecondition naming the package and
// `scripts/install-deps.sh --corpus` when bible-kjv is missing; a missing
// janeaustenr is only a note. Thread contract: runs subprocesses; call from one
// thread.
StatusOr<CorpusResult> ExtractCorpus(const CorpusOptions& options);

}  // namespace hpod::train::data
