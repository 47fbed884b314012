#include "hpod/train/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_map>

#include "hpod/base/crypto.h"
#include "hpod/base/file_util.h"

namespace hpod::train::data {

StatusOr<Tokenizer> Tokenizer::Load(const std::string& model_path) {
  HPOD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(model_path));
  Tokenizer t;
  t.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status s;
  try {
    s = t.sp_->LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    return DataLossError("tokenizer " + model_path + ": " + e.what());
  }
  if (!s.ok()) {
    return DataLossError("tokenizer " + model_path +
                         " is not a SentencePiece model: " + s.ToString());
  }
  t.id_ = "sha256:" + HexEncode(Sha256(bytes));
  t.path_ = model_path;
  return t;
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  sentencepiece::util::Status s;
  try {
    s = sp_->Encode(text, &ids);
  } catch (const std::exception& e) {
    return InternalError(std::string("encoding: ") + e.what());
  }
  if (!s.ok()) return InternalError("encoding: " + s.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

StatusOr<std::string> Tokenizer::Decode(std::span<const int32_t> ids) const {
  const int32_t n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n) {
      return InvalidArgumentError("decoding: id " + std::to_string(ids[i]) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                  std::to_string(n) + ")");
    }
  }
  std::string text;
  sentencepiece::util::Status s;
  try {
    s = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  } catch (const std::exception& e) {
    return InternalError(std::string("decoding: ") + e.what());
  }
  if (!s.ok()) return InternalError("decoding: " + s.ToString());
  return text;
}

int32_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int32_t Tokenizer::eos_id() const { return sp_->eos_id(); }

Status TrainTokenizer(const TrainTokenizerOptions& o) {
  if (o.inputs.empty()) return InvalidArgumentError("train tokenizer: no input files");
  if (o.vocab_size <= 0) return InvalidArgumentError("train tokenizer: vocab_size must be > 0");
  if (o.model_prefix.empty()) return InvalidArgumentError("train tokenizer: empty model prefix");
  std::string input;
  for (const std::string& path : o.inputs) {
    // sentencepiece splits its `input` flag at commas.
    if (path.find(',') != std::string::npos) {
      return InvalidArgumentError("train tokenizer: input path " + path +
                                  " contains a comma, which sentencepiece cannot take; rename it");
    }
    if (::access(path.c_str(), R_OK) != 0) return ErrnoStatus(errno, "input " + path);
    if (!input.empty()) input += ',';
    input += path;
  }
  const std::unordered_map<std::string, std::string> args = {
      {"input", input},
      {"model_prefix", o.model_prefix},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", "bpe"},
      {"character_coverage", "1.0"},
      {"num_threads", std::to_string(std::max(1, o.threads))},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"byte_fallback", "true"},
      {"unk_surface", " \xe2\x81\x87 "},
      {"normalization_rule_name", "identity"},
      {"max_sentence_length", "16384"},
      {"minloglevel", o.verbose ? "0" : "1"},
  };
  sentencepiece::util::Status s;
  try {
    s = sentencepiece::SentencePieceTrainer::Train(args);
  } catch (const std::exception& e) {
    return InternalError(std::string("train tokenizer: ") + e.what());
  }
  if (!s.ok()) {
    // Bad arguments (vocab too small or too large for the corpus) are the
    // common failure; sentencepiece reports them as INTERNAL.
    return InvalidArgumentError("train tokenizer: " + s.ToString());
  }
  return OkStatus();
}

Status TrainTokenizer(const std::vector<std::string>& inputs, int vocab_size,
                      const std::string& model_prefix, int threads) {
  TrainTokenizerOptions o;
  o.inputs = inputs;
  o.vocab_size = vocab_size;
  o.model_prefix = model_prefix;
  o.threads = threads;
  return TrainTokenizer(o);
}

}  // namespace hpod::train::data
