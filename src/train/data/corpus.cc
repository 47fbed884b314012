#include "hpod/train/data/corpus.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "hpod/base/subprocess.h"
#include "hpod/base/file_util.h"

namespace hpod::train::data {
namespace {

constexpr char kInstallHint[] = "run scripts/install-deps.sh --corpus (or apt-get install ";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at '\n'; calls f(line) for each line without its terminator.
template <typename F>
void ForEachLine(std::string_view text, F f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    f(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// "  12 And God…" → "And God…"; nullopt-like empty view + false when the line
// is not a verse start.
bool VerseText(std::string_view line, std::string_view* text) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i == 0) return false;  // verses are indented; headings and continuations are not
  const size_t digits = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == digits || i >= line.size() || line[i] != ' ') return false;
  *text = Trim(line.substr(i + 1));
  return true;
}

bool HaveExecutable(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    const std::filesystem::path candidate =
        std::filesystem::path(dir.empty() ? std::string_view(".") : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}

std::string Megabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace

CleanedText CleanKjv(std::string_view raw) {
  CleanedText out;
  std::string verse;
  bool have_verse = false;
  bool after_blank = true;  // the output starts with a blank line, then "Genesis 1"
  const auto flush = [&] {
    if (have_verse && !verse.empty()) {
      out.text += verse;
      out.text += '\n';
      ++out.documents;
    }
    verse.clear();
    have_verse = false;
  };
  ForEachLine(raw, [&](std::string_view line) {
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) {
      flush();
      after_blank = true;
      return;
    }
    std::string_view text;
    if (VerseText(line, &text)) {
      flush();
      verse.assign(text);
      have_verse = true;
    } else if (after_blank) {
      // A chapter heading such as "Song of Solomon 2": dropped.
    } else if (have_verse) {
      verse += ' ';
      verse.append(trimmed);
    }
    after_blank = false;
  });
  flush();
  return out;
}

CleanedText JoinParagraphs(std::string_view raw) {
  CleanedText out;
  std::string paragraph;
  const auto flush = [&] {
    if (!paragraph.empty()) {
      out.text += paragraph;
      out.text += '\n';
      ++out.documents;
    }
    paragraph.clear();
  };
  ForEachLine(raw, [&](std::string_view line) {
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) {
      flush();
      return;
    }
    if (!paragraph.empty()) paragraph += ' ';
    paragraph.append(trimmed);
  });
  flush();
  return out;
}

StatusOr<CorpusResult> ExtractCorpus(const CorpusOptions& o) {
  const auto note = [&](const std::string& line) {
    if (o.note) o.note(line);
  };
  if (o.output_dir.empty()) return InvalidArgumentError("corpus: empty output directory");
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) return InternalError("creating " + o.output_dir + ": " + ec.message());

  // KJV (required).
  if (!HaveExecutable("bible") || ::access("/usr/lib/bible.data", R_OK) != 0) {
    return FailedPreconditionError(std::string("the KJV needs the bible-kjv package: ") +
                                   kInstallHint + "bible-kjv)");
  }
  SubprocessOptions bible;
  bible.argv = {"bible", "Gen1:1-Rev22:21"};
  bible.timeout = std::chrono::seconds(120);
  bible.max_captured_bytes = 64u << 20;
  HPOD_ASSIGN_OR_RETURN(SubprocessResult r, RunCommand(bible));
  if (r.exit_code != 0 || r.timed_out || r.truncated) {
    return InternalError("bible \"Gen1:1-Rev22:21\" failed (exit " + std::to_string(r.exit_code) +
                         "): " + std::string(Trim(r.stderr_data)));
  }
  CleanedText kjv = CleanKjv(r.stdout_data);
  CorpusResult result;
  result.kjv_path = (std::filesystem::path(o.output_dir) / "kjv.txt").string();
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(result.kjv_path, kjv.text));
  result.kjv_verses = kjv.documents;
  result.kjv_bytes = static_cast<int64_t>(kjv.text.size());
  note("wrote " + result.kjv_path + ": " + std::to_string(kjv.documents) + " verses, " +
       Megabytes(result.kjv_bytes));

  if (!o.austen) return result;
  // Austen (optional): janeaustenr ships the novels as R character vectors (lazy
  // data, hence library()); a blank line after each keeps the books apart.
  if (!HaveExecutable("Rscript")) {
    note(std::string("skipping Austen: Rscript is not installed; ") + kInstallHint +
         "r-cran-janeaustenr)");
    return result;
  }
  SubprocessOptions rscript;
  rscript.argv = {"Rscript", "--vanilla", "-e",
                  "if (!requireNamespace('janeaustenr', quietly = TRUE)) quit(status = 3); "
                  "suppressPackageStartupMessages(library(janeaustenr)); "
                  "for (b in c('sensesensibility', 'prideprejudice', 'mansfieldpark', 'emma', "
                  "'northangerabbey', 'persuasion')) { cat(get(b), sep = '\\n'); cat('\\n\\n') }"};
  rscript.env = {{"LANG", "C.UTF-8"}, {"LC_ALL", "C.UTF-8"}};  // UTF-8 out, not <U+00E9>
  rscript.timeout = std::chrono::seconds(120);
  rscript.max_captured_bytes = 64u << 20;
  HPOD_ASSIGN_OR_RETURN(SubprocessResult a, RunCommand(rscript));
  if (a.exit_code == 3) {
    note(std::string("skipping Austen: the R package janeaustenr is not installed; ") +
         kInstallHint + "r-cran-janeaustenr)");
    return result;
  }
  if (a.exit_code != 0 || a.timed_out || a.truncated) {
    return InternalError("Rscript (janeaustenr) failed (exit " + std::to_string(a.exit_code) +
                         "): " + std::string(Trim(a.stderr_data)));
  }
  CleanedText austen = JoinParagraphs(a.stdout_data);
  result.austen_path = (std::filesystem::path(o.output_dir) / "austen.txt").string();
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(result.austen_path, austen.text));
  result.austen_paragraphs = austen.documents;
  result.austen_bytes = static_cast<int64_t>(austen.text.size());
  note("wrote " + result.austen_path + ": " + std::to_string(austen.documents) + " paragraphs, " +
       Megabytes(result.austen_bytes));
  return result;
}

}  // namespace hpod::train::data
