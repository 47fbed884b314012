// hpod-data: the data side of hpod-train.
//   train-tokenizer  SentencePiece BPE (llama2.c options) from text files
//   tokenize         text files → token shard(s), one BOS per line (document)
//   info             a shard's header, checksum and unigram entropy
//   corpus           the KJV (+ Austen) from Debian packages, one document per line
// Errors are one line on stderr and exit 1; progress goes to stderr, results to stdout.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "hpod/train/data/corpus.h"
#include "hpod/train/data/shard.h"
#include "hpod/train/data/tokenize_files.h"
#include "hpod/train/data/tokenizer.h"

namespace hpod::train::data {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const std::string& message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "hpod-data: %s\n", line.c_str());
  return 1;
}

std::string Human(double v) {  // 2165110 → "2.17M"
  char buf[32];
  if (v >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

int64_t TotalBytes(const std::vector<std::string>& files) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& f : files) total += static_cast<int64_t>(std::filesystem::file_size(f, ec));
  return total;
}

int DefaultThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// --- train-tokenizer ---------------------------------------------------------

int RunTrainTokenizer(const TrainTokenizerOptions& o) {
  const double mb = static_cast<double>(TotalBytes(o.inputs)) / 1e6;
  std::fprintf(stderr, "training BPE tokenizer (vocab %d) on %zu file(s), %.2f MB, %d thread(s)\n",
               o.vocab_size, o.inputs.size(), mb, o.threads);
  const auto t0 = Clock::now();
  Status s = TrainTokenizer(o);
  if (!s.ok()) return Fail(s.message());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  auto tok = Tokenizer::Load(o.model_prefix + ".model");
  if (!tok.ok()) return Fail(tok.status().message());
  std::printf("wrote %s.model and %s.vocab: vocab %d, trained in %.2f s, id %s\n",
              o.model_prefix.c_str(), o.model_prefix.c_str(), tok->vocab_size(), secs,
              tok->id().c_str());
  return 0;
}

// --- tokenize ----------------------------------------------------------------

int RunTokenize(const std::string& tokenizer, const TokenizeOptions& o) {
  auto tok = Tokenizer::Load(tokenizer);
  if (!tok.ok()) return Fail(tok.status().message());
  auto last = Clock::now();
  const auto rate = [](const TokenizeStats& s) {
    return s.seconds > 0 ? static_cast<double>(s.bytes_read) / 1e6 / s.seconds : 0.0;
  };
  auto stats = TokenizeFiles(*tok, o, [&](const TokenizeStats& s) {
    if (Clock::now() - last < std::chrono::milliseconds(500)) return;
    last = Clock::now();
    std::fprintf(stderr, "tokenized %s tokens (%.1f MB/s)\n",
                 Human(static_cast<double>(s.tokens)).c_str(), rate(s));
  });
  if (!stats.ok()) return Fail(stats.status().message());
  const TokenizeStats& s = *stats;
  std::printf(
      "tokenized %.2f MB, %lld documents into %lld tokens (%.2f bytes/token) in %.2f s "
      "(%.1f MB/s, %s tokens/s) with tokenizer %s\n",
      static_cast<double>(s.bytes_read) / 1e6, static_cast<long long>(s.documents),
      static_cast<long long>(s.tokens),
      s.tokens > 0 ? static_cast<double>(s.bytes_read) / s.tokens : 0.0, s.seconds, rate(s),
      Human(s.seconds > 0 ? s.tokens / s.seconds : 0).c_str(), tok->id().c_str());
  std::printf("wrote %s: %lld documents, %lld tokens\n", o.output.c_str(),
              static_cast<long long>(s.train_documents), static_cast<long long>(s.train_tokens));
  if (!o.val_output.empty()) {
    std::printf("wrote %s: %lld documents, %lld tokens\n", o.val_output.c_str(),
                static_cast<long long>(s.val_documents), static_cast<long long>(s.val_tokens));
  }
  return 0;
}

// --- info --------------------------------------------------------------------

int RunInfo(const std::string& path, const std::string& format) {
  auto shard = Shard::Open(path, /*verify_checksum=*/false);
  if (!shard.ok()) return Fail(shard.status().message());
  const Status verified = shard->Verify();
  const double entropy = UnigramEntropy(*shard);
  std::unordered_set<int32_t> distinct;
  for (int64_t i = 0; i < shard->num_tokens(); ++i) distinct.insert(shard->token(i));
  const std::string checksum =
      Format("%016llx", static_cast<unsigned long long>(shard->checksum()));
  const int64_t bytes = 64 + shard->num_tokens() * shard->token_bytes();
  if (format == "json") {
    nlohmann::json j = {
        {"path", path},
        {"version", kShardVersion},
        {"vocab_size", shard->vocab_size()},
        {"token_bytes", shard->token_bytes()},
        {"num_tokens", shard->num_tokens()},
        {"bytes", bytes},
        {"checksum", "xxh3:" + checksum},
        {"checksum_ok", verified.ok()},
        {"distinct_tokens", distinct.size()},
        {"unigram_entropy_nats", entropy},
        {"unigram_perplexity", std::exp(entropy)},
    };
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("file             %s\n", path.c_str());
    std::printf("version          %u\n", kShardVersion);
    std::printf("vocab_size       %u\n", shard->vocab_size());
    std::printf("token_bytes      %u\n", shard->token_bytes());
    std::printf("num_tokens       %lld\n", static_cast<long long>(shard->num_tokens()));
    std::printf("size             %.2f MB\n", static_cast<double>(bytes) / 1e6);
    std::printf("checksum         xxh3:%s (%s)\n", checksum.c_str(),
                verified.ok() ? "ok" : "MISMATCH");
    std::printf("distinct tokens  %zu of %u\n", distinct.size(), shard->vocab_size());
    std::printf("unigram entropy  %.4f nats/token (perplexity %.1f)\n", entropy, std::exp(entropy));
  }
  if (!verified.ok()) return Fail(verified.message());
  return 0;
}

// --- corpus ------------------------------------------------------------------

int RunCorpus(const std::string& output, bool austen) {
  CorpusOptions o;
  o.output_dir = output;
  o.austen = austen;
  o.note = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const auto t0 = Clock::now();
  auto r = ExtractCorpus(o);
  if (!r.ok()) return Fail(r.status().message());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("corpus in %s: kjv.txt %lld verses (%.2f MB)", output.c_str(),
              static_cast<long long>(r->kjv_verses), static_cast<double>(r->kjv_bytes) / 1e6);
  if (!r->austen_path.empty()) {
    std::printf(", austen.txt %lld paragraphs (%.2f MB)",
                static_cast<long long>(r->austen_paragraphs),
                static_cast<double>(r->austen_bytes) / 1e6);
  }
  std::printf("; %.1f s\n", secs);
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "hpod-data: tokenizers and token shards for hpod-train.\n"
      "Typical use: corpus --output corpus; train-tokenizer --input corpus/kjv.txt --input "
      "corpus/austen.txt --vocab-size 4096 --output tok4096; tokenize --tokenizer "
      "tok4096.model --input corpus/kjv.txt --input corpus/austen.txt --output train.bin "
      "--val-output val.bin",
      "hpod-data"};
  app.require_subcommand(1);

  // Flags bind straight into the library's option structs.
  TrainTokenizerOptions tt;
  tt.vocab_size = 0;  // required
  tt.threads = DefaultThreads();
  auto* train = app.add_subcommand(
      "train-tokenizer",
      "Train a SentencePiece BPE tokenizer with llama2.c's options (byte fallback, split digits, "
      "identity normalization); writes PREFIX.model and PREFIX.vocab");
  train->add_option("--input", tt.inputs, "Text file, one document per line (repeatable)")
      ->required()
      ->check(CLI::ExistingFile);
  train
      ->add_option("--vocab-size", tt.vocab_size,
                   "Vocabulary size, incl. 256 byte pieces and <unk>,<s>,</s> (e.g. 512, 4096)")
      ->required()
      ->check(CLI::Range(260, 1 << 20));
  train
      ->add_option("--output", tt.model_prefix,
                   "Model prefix: writes PREFIX.model and PREFIX.vocab")
      ->required();
  train->add_option("--threads", tt.threads, "Trainer threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  train->add_flag("--verbose", tt.verbose, "Show sentencepiece's own training log");

  std::string tokenizer_path;
  TokenizeOptions tk;
  tk.threads = DefaultThreads();
  auto* tokenize = app.add_subcommand(
      "tokenize",
      "Tokenize text into a token shard: every non-blank line is a document, written as BOS + "
      "its tokens; optionally split documents into a validation shard");
  tokenize->add_option("--tokenizer", tokenizer_path, "SentencePiece .model file")
      ->required()
      ->check(CLI::ExistingFile);
  tokenize->add_option("--input", tk.inputs, "Text file, one document per line (repeatable)")
      ->required()
      ->check(CLI::ExistingFile);
  tokenize->add_option("--output", tk.output, "Training shard to write (e.g. train.bin)")
      ->required();
  tokenize->add_option("--val-output", tk.val_output,
                       "Validation shard to write; documents go there with probability "
                       "--val-fraction, chosen by a hash of the document index");
  tokenize
      ->add_option("--val-fraction", tk.val_fraction,
                   "Fraction of documents for --val-output, in [0, 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999999));
  tokenize->add_option("--val-seed", tk.val_seed, "Seed of the validation split")
      ->capture_default_str();
  tokenize->add_option("--threads", tk.threads, "Encoding threads (output is the same for any)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));

  std::string info_path, info_format = "text";
  auto* info = app.add_subcommand(
      "info",
      "Print a shard's header, token count, checksum check and unigram entropy; exit 1 "
      "when the shard is corrupt");
  info->add_option("FILE", info_path, "Token shard (.bin)")->required();
  info->add_option("--output", info_format, "Output format: text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));

  std::string corpus_dir;
  bool no_austen = false;
  auto* corpus = app.add_subcommand(
      "corpus",
      "Extract the training corpus from Debian packages: the KJV (bible-kjv) as one verse per "
      "line into DIR/kjv.txt and, when r-cran-janeaustenr is installed, Austen's six novels as "
      "one paragraph per line into DIR/austen.txt (install both: scripts/install-deps.sh "
      "--corpus)");
  corpus->add_option("--output", corpus_dir, "Directory to write kjv.txt and austen.txt to")
      ->required();
  corpus->add_flag("--no-austen", no_austen, "Extract the KJV only");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::string where = "hpod-data";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    return Fail(std::string(e.what()) + " (see " + where + " --help)");
  }
  if (*train) return RunTrainTokenizer(tt);
  if (*tokenize) {
    if (tokenize->count("--val-fraction") > 0 && tk.val_output.empty()) {
      return Fail("--val-fraction needs --val-output (where the validation shard goes)");
    }
    return RunTokenize(tokenizer_path, tk);
  }
  if (*info) return RunInfo(info_path, info_format);
  if (*corpus) return RunCorpus(corpus_dir, !no_austen);
  return Fail("no command given (see hpod-data --help)");
}

}  // namespace
}  // namespace hpod::train::data

int main(int argc, char** argv) { return hpod::train::data::Main(argc, argv); }
