// The tokenizer: SentencePiece models (.model files, the format llama2.c and
// Llama use) loaded and trained through Debian's libsentencepiece.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace hpod::train::data {

// A loaded SentencePiece model.
//
// Thread contract: immutable after Load; const methods are safe from any number
// of threads (SentencePieceProcessor's encode/decode are const and keep no
// state). Movable, not copyable.
class Tokenizer {
 public:
  // Reads and parses a .model file. NotFound when the file is missing,
  // DataLoss naming the file when it is not a valid SentencePiece model.
  static StatusOr<Tokenizer> Load(const std::string& model_path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`, without BOS/EOS (callers add those).
  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // Text of `ids`; InvalidArgument for an id outside [0, vocab_size).
  StatusOr<std::string> Decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;  // -1 when the model has none
  int32_t eos_id() const;  // -1 when the model has none
  // "sha256:<64 hex>" of the .model file's bytes: checkpoints record it, so a
  // run resumed with a different tokenizer is caught. A .model embeds its
  // training options (input paths, prefix, threads), so the id names the file,
  // not just the vocabulary: retraining reproduces it only with the same command.
  const std::string& id() const { return id_; }
  const std::string& path() const { return path_; }

 private:
  Tokenizer() = default;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string id_;
  std::string path_;
};

// Options of TrainTokenizer (besides the llama2.c set, which is fixed).
struct TrainTokenizerOptions {
  std::vector<std::string> inputs;  // text files; one sentence (document) per line
  int vocab_size = 4096;
  std::string model_prefix;  // writes <prefix>.model and <prefix>.vocab
  int threads = 1;
  // Keep sentencepiece's own INFO logging (pages of it); off by default.
  bool verbose = false;
};

// Trains a BPE model with llama2.c's options: character_coverage 1.0,
// split_digits, byte_fallback, allow_whitespace_only_pieces, normalization
// "identity", unk_surface " \342\201\207 ", max_sentence_length 16384 (longer
// lines are skipped by the trainer). With
// byte_fallback the vocabulary holds 256 byte pieces + <unk>,<s>,</s> + every
// character of the input, so vocab_size must exceed that (~350 for English);
// sentencepiece's message says so otherwise (InvalidArgument). Training is
// deterministic: the same call writes the same bytes.
//
// Thread contract: sentencepiece keeps its log level in a global, so do not
// call this from two threads at once.
Status TrainTokenizer(const TrainTokenizerOptions& options);
// The signature of the shared design: TrainTokenizer({inputs, vocab_size, model_prefix, threads}).
Status TrainTokenizer(const std::vector<std::string>& inputs, int vocab_size,
                      const std::string& model_prefix, int threads);

}  // namespace hpod::train::data
