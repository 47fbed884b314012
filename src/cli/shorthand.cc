#include "hpod/cli/shorthand.h"

#include <regex>
#include <utility>

namespace hpod::cli {
namespace {

using Json = nlohmann::ordered_json;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Character classes of awscli's value regexes. Bytes >= 0x80 (UTF-8) are allowed
// everywhere, as the Python classes run up to U+FFFF.
bool IsStartWord(unsigned char c) {
  if (c >= 0x80) return true;
  return c == '!' || (c >= '#' && c <= '&') || (c >= '(' && c <= '+') || (c >= '-' && c <= '<') ||
         (c >= '>' && c <= 'Z') || (c >= '\\' && c <= 'z') || c >= '|';
}
bool IsFirstFollow(unsigned char c) {
  if (c >= 0x80 || IsSpace(static_cast<char>(c))) return true;
  return c == '!' || (c >= '#' && c <= '&') || (c >= '(' && c <= '+') || (c >= '-' && c <= '\\') ||
         (c >= '^' && c <= '|') || c >= '~';
}
bool IsSecondFollow(unsigned char c) {
  if (c >= 0x80 || IsSpace(static_cast<char>(c))) return true;
  return c == '!' || (c >= '#' && c <= '&') || (c >= '(' && c <= '+') || (c >= '-' && c <= '<') ||
         c >= '>';
}
bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '#' || c == '/' || c == ':';
}

std::string RStrip(std::string s) {
  while (!s.empty() && IsSpace(s.back())) s.pop_back();
  return s;
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// Thread contract: single use by one thread.
class Parser {
 public:
  Parser(std::string_view input, const ShorthandOptions& options)
      : input_(input), options_(options) {}

  StatusOr<Json> Parse() { return Parameter(); }

 private:
  // awscli's ShorthandParseError._error_location: the input with a caret under
  // the failing index (on its own line when the input spans several lines).
  std::string ErrorLocation(size_t index) const {
    std::string consumed(input_);
    std::string remaining;
    size_t num_spaces = index;
    std::string_view before = input_.substr(0, std::min(index, input_.size()));
    size_t last_nl = before.rfind('\n');
    if (last_nl != std::string_view::npos) num_spaces = index - last_nl - 1;
    size_t next_nl = index < input_.size() ? input_.find('\n', index) : std::string_view::npos;
    if (next_nl != std::string_view::npos) {
      consumed = std::string(input_.substr(0, next_nl));
      remaining = std::string(input_.substr(next_nl));
    }
    return consumed + "\n" + std::string(num_spaces, ' ') + "^" + remaining;
  }

  Status SyntaxError(std::string_view expected, std::string_view actual, size_t index) const {
    return InvalidArgumentError("Expected: '" + std::string(expected) + "', received: '" +
                                std::string(actual) + "' for input:\n" + ErrorLocation(index));
  }

  bool AtEof() const { return index_ >= input_.size(); }
  // Only valid when !AtEof().
  char Current() const { return input_[index_]; }
  bool CurrentIs(char c) const { return !AtEof() && Current() == c; }

  void ConsumeWhitespace() {
    while (!AtEof() && IsSpace(Current())) ++index_;
  }

  Status Expect(char c, bool consume_whitespace = false) {
    if (consume_whitespace) ConsumeWhitespace();
    if (AtEof()) return SyntaxError(std::string(1, c), "EOF", index_);
    if (Current() != c) return SyntaxError(std::string(1, c), std::string(1, Current()), index_);
    ++index_;
    if (consume_whitespace) ConsumeWhitespace();
    return OkStatus();
  }

  StatusOr<Json> Parameter() {
    Json params = Json::object();
    HPOD_ASSIGN_OR_RETURN(auto kv, KeyVal());
    params[kv.first] = std::move(kv.second);
    size_t last_index = index_;
    while (index_ < input_.size()) {
      HPOD_RETURN_IF_ERROR(Expect(',', true));
      HPOD_ASSIGN_OR_RETURN(auto next, KeyVal());
      if (params.contains(next.first)) {
        return InvalidArgumentError("Second instance of key \"" + next.first +
                                    "\" encountered for input:\n" + ErrorLocation(last_index + 1) +
                                    "\nThis is often because there is a preceding \",\" instead "
                                    "of a space.");
      }
      params[next.first] = std::move(next.second);
      last_index = index_;
    }
    return params;
  }

  // Consumes an optional '@' (which asks for the value to be loaded from a file).
  // Like awscli, whitespace before a missing '@' stays consumed.
  void OptionalParamFileMarker() {
    resolve_param_files_ = false;
    ConsumeWhitespace();
    if (CurrentIs('@')) {
      ++index_;
      ConsumeWhitespace();
      resolve_param_files_ = true;
    }
  }

  StatusOr<std::pair<std::string, Json>> KeyVal() {
    std::string key = Key();
    OptionalParamFileMarker();
    HPOD_RETURN_IF_ERROR(Expect('=', true));
    HPOD_ASSIGN_OR_RETURN(Json values, Values());
    return std::make_pair(std::move(key), std::move(values));
  }

  std::string Key() {
    size_t start = index_;
    while (!AtEof() && IsKeyChar(Current())) ++index_;
    return std::string(input_.substr(start, index_ - start));
  }

  StatusOr<Json> Values() {
    if (AtEof()) return Json("");
    if (Current() == '[') return ExplicitList();
    if (Current() == '{') return HashLiteral();
    return CsvValue();
  }

  StatusOr<Json> CsvValue() {
    HPOD_ASSIGN_OR_RETURN(std::string first, FirstValue());
    ConsumeWhitespace();
    if (AtEof() || Current() != ',') return Json(first);
    HPOD_RETURN_IF_ERROR(Expect(',', true));
    Json csv_list = Json::array({first});
    while (true) {
      // A syntax error here means the next word is a key ("a,b,Next=c"): back up
      // to the comma before it and let Parameter() continue from there.
      StatusOr<std::string> current = SecondValue();
      if (current.ok()) {
        ConsumeWhitespace();
        if (AtEof()) {
          csv_list.push_back(*current);
          break;
        }
        Status comma = Expect(',', true);
        if (comma.ok()) {
          csv_list.push_back(*current);
          continue;
        }
        current = comma;
      }
      if (AtEof()) return current.status();
      BacktrackTo(',');
      break;
    }
    if (csv_list.size() == 1) return Json(first);
    return csv_list;
  }

  void BacktrackTo(char c) {
    // index_ is unsigned; awscli's loop stops at -1, which cannot happen here
    // because a ',' was consumed before any backtracking.
    while (index_ > 0 && (index_ >= input_.size() || input_[index_] != c)) --index_;
  }

  // Matches (\\,|[start])(\\,|[follow])* at index_; returns the match length.
  size_t MatchValue(bool (*follow)(unsigned char)) const {
    size_t i = index_;
    auto escaped_comma = [&](size_t at) {
      return at + 1 < input_.size() && input_[at] == '\\' && input_[at + 1] == ',';
    };
    if (escaped_comma(i)) {
      i += 2;
    } else if (i < input_.size() && IsStartWord(static_cast<unsigned char>(input_[i]))) {
      ++i;
    } else {
      return 0;
    }
    while (i < input_.size()) {
      if (escaped_comma(i)) {
        i += 2;
      } else if (follow(static_cast<unsigned char>(input_[i]))) {
        ++i;
      } else {
        break;
      }
    }
    return i - index_;
  }

  StatusOr<std::string> MaybeResolve(std::string value) {
    if (!resolve_param_files_ || !options_.load_param_file) return value;
    HPOD_ASSIGN_OR_RETURN(std::optional<std::string> loaded, options_.load_param_file(value));
    if (loaded.has_value()) return *std::move(loaded);
    return value;
  }

  StatusOr<std::string> UnquotedValue() {
    size_t n = MatchValue(&IsFirstFollow);
    if (n == 0) return std::string();
    std::string consumed(input_.substr(index_, n));
    index_ += n;
    return MaybeResolve(RStrip(ReplaceAll(std::move(consumed), "\\,", ",")));
  }

  StatusOr<std::string> FirstValue() {
    if (CurrentIs('\'')) return QuotedValue('\'');
    if (CurrentIs('"')) return QuotedValue('"');
    return UnquotedValue();
  }

  StatusOr<std::string> SecondValue() {
    if (CurrentIs('\'')) return QuotedValue('\'');
    if (CurrentIs('"')) return QuotedValue('"');
    size_t n = MatchValue(&IsSecondFollow);
    if (n == 0) return SyntaxError("<second>", "<none>", index_);
    std::string consumed(input_.substr(index_, n));
    index_ += n;
    return MaybeResolve(RStrip(ReplaceAll(std::move(consumed), "\\,", ",")));
  }

  // awscli's quoted regexes q(?:\\q|[^q])*q (std::regex backtracks the same way
  // on a trailing \q), then unescapes \q and \\.
  StatusOr<std::string> QuotedValue(char q) {
    static const std::regex kSingle(R"('(?:\\'|[^'])*')");
    static const std::regex kDouble(R"("(?:\\"|[^"])*")");
    std::match_results<std::string_view::const_iterator> m;
    std::string_view rest = input_.substr(index_);
    if (!std::regex_search(rest.begin(), rest.end(), m, q == '\'' ? kSingle : kDouble,
                           std::regex_constants::match_continuous)) {
      return SyntaxError(q == '\'' ? "<singled quoted>" : "<double quoted>", "<none>", index_);
    }
    size_t length = static_cast<size_t>(m.length(0));
    std::string value(input_.substr(index_ + 1, length - 2));
    index_ += length;
    value = ReplaceAll(std::move(value), std::string("\\") + q, std::string(1, q));
    value = ReplaceAll(std::move(value), "\\\\", "\\");
    return MaybeResolve(std::move(value));
  }

  StatusOr<Json> ExplicitList() {
    HPOD_RETURN_IF_ERROR(Expect('[', true));
    Json values = Json::array();
    // At EOF the loop runs once more and fails on the missing ',' (as awscli does).
    while (!CurrentIs(']')) {
      HPOD_ASSIGN_OR_RETURN(Json value, ExplicitValues());
      values.push_back(std::move(value));
      ConsumeWhitespace();
      if (!CurrentIs(']')) {
        HPOD_RETURN_IF_ERROR(Expect(','));
        ConsumeWhitespace();
      }
    }
    HPOD_RETURN_IF_ERROR(Expect(']'));
    return values;
  }

  StatusOr<Json> ExplicitValues() {
    if (CurrentIs('[')) return ExplicitList();
    if (CurrentIs('{')) return HashLiteral();
    HPOD_ASSIGN_OR_RETURN(std::string value, FirstValue());
    return Json(std::move(value));
  }

  StatusOr<Json> HashLiteral() {
    HPOD_RETURN_IF_ERROR(Expect('{', true));
    Json keyvals = Json::object();
    while (!CurrentIs('}')) {
      std::string key = Key();
      OptionalParamFileMarker();
      HPOD_RETURN_IF_ERROR(Expect('=', true));
      HPOD_ASSIGN_OR_RETURN(Json value, ExplicitValues());
      ConsumeWhitespace();
      if (!CurrentIs('}')) {
        HPOD_RETURN_IF_ERROR(Expect(','));
        ConsumeWhitespace();
      }
      keyvals[key] = std::move(value);
    }
    HPOD_RETURN_IF_ERROR(Expect('}'));
    return keyvals;
  }

  std::string_view input_;
  const ShorthandOptions& options_;
  size_t index_ = 0;
  bool resolve_param_files_ = false;
};

}  // namespace

StatusOr<nlohmann::ordered_json> ParseShorthand(std::string_view input,
                                                const ShorthandOptions& options) {
  Parser parser(input, options);
  return parser.Parse();
}

}  // namespace hpod::cli
