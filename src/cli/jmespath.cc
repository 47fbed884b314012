// JMESPath, part 1: the lexer and the Pratt parser (jmespath.py's), which
// build the tree that jmespath_eval.cc interprets.
#include "hpod/cli/jmespath.h"

#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "hpod/cli/jmespath_internal.h"

namespace hpod::cli {

enum class Tok {
  kEof,
  kUnquotedIdentifier,
  kQuotedIdentifier,
  kLiteral,
  kRbracket,
  kRparen,
  kComma,
  kRbrace,
  kNumber,
  kCurrent,
  kExpref,
  kColon,
  kPipe,
  kOr,
  kAnd,
  kEq,
  kGt,
  kLt,
  kGte,
  kLte,
  kNe,
  kFlatten,
  kStar,
  kFilter,
  kDot,
  kNot,
  kLbrace,
  kLbracket,
  kLparen,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // identifier name, raw lexeme
  Json value;        // literal value or number
  size_t start = 0;
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<Node>;

// jmespath.py's binding powers; tokens that cannot continue an expression are 0.
int BindingPower(Tok t) {
  switch (t) {
    case Tok::kPipe:
      return 1;
    case Tok::kOr:
      return 2;
    case Tok::kAnd:
      return 3;
    case Tok::kEq:
    case Tok::kGt:
    case Tok::kLt:
    case Tok::kGte:
    case Tok::kLte:
    case Tok::kNe:
      return 5;
    case Tok::kFlatten:
      return 9;
    case Tok::kStar:
      return 20;
    case Tok::kFilter:
      return 21;
    case Tok::kDot:
      return 40;
    case Tok::kNot:
      return 45;
    case Tok::kLbrace:
      return 50;
    case Tok::kLbracket:
      return 55;
    case Tok::kLparen:
      return 60;
    default:
      return 0;
  }
}
constexpr int kProjectionStop = 10;

std::string TokName(const Token& t) {
  if (t.type == Tok::kEof) return "EOF";
  return t.text;
}

// Thread contract: single use by one thread.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  StatusOr<std::vector<Token>> Tokenize() {
    std::vector<Token> out;
    while (i_ < s_.size()) {
      char c = s_[i_];
      size_t start = i_;
      auto simple = [&](Tok t, size_t len) {
        out.push_back(Token{t, std::string(s_.substr(start, len)), Json(), start});
        i_ += len;
      };
      auto peek = [&](size_t k) { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; };
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '.') {
        simple(Tok::kDot, 1);
      } else if (c == '*') {
        simple(Tok::kStar, 1);
      } else if (c == ']') {
        simple(Tok::kRbracket, 1);
      } else if (c == ',') {
        simple(Tok::kComma, 1);
      } else if (c == ':') {
        simple(Tok::kColon, 1);
      } else if (c == '@') {
        simple(Tok::kCurrent, 1);
      } else if (c == '(') {
        simple(Tok::kLparen, 1);
      } else if (c == ')') {
        simple(Tok::kRparen, 1);
      } else if (c == '{') {
        simple(Tok::kLbrace, 1);
      } else if (c == '}') {
        simple(Tok::kRbrace, 1);
      } else if (IsIdentStart(c)) {
        while (i_ < s_.size() && IsIdentChar(s_[i_])) ++i_;
        std::string name(s_.substr(start, i_ - start));
        out.push_back(Token{Tok::kUnquotedIdentifier, name, Json(name), start});
      } else if (c == '[') {
        if (peek(1) == ']') {
          simple(Tok::kFlatten, 2);
        } else if (peek(1) == '?') {
          simple(Tok::kFilter, 2);
        } else {
          simple(Tok::kLbracket, 1);
        }
      } else if (c == '\'') {
        HPOD_ASSIGN_OR_RETURN(std::string raw, ConsumeUntil('\''));
        std::string value = Replace(raw, "\\'", "'");
        out.push_back(Token{Tok::kLiteral, "'" + raw + "'", Json(value), start});
      } else if (c == '|') {
        peek(1) == '|' ? simple(Tok::kOr, 2) : simple(Tok::kPipe, 1);
      } else if (c == '&') {
        peek(1) == '&' ? simple(Tok::kAnd, 2) : simple(Tok::kExpref, 1);
      } else if (c == '`') {
        HPOD_ASSIGN_OR_RETURN(std::string raw, ConsumeUntil('`'));
        std::string lexeme = Replace(raw, "\\`", "`");
        Json value = Json::parse(lexeme, nullptr, false);
        if (value.is_discarded()) {
          // jmespath.py's deprecated fallback: an unquoted string literal.
          value = Json::parse("\"" + lexeme + "\"", nullptr, false);
          if (value.is_discarded()) return Error("Bad token `" + raw + "`: invalid JSON", start);
        }
        out.push_back(Token{Tok::kLiteral, "`" + raw + "`", value, start});
      } else if ((c >= '0' && c <= '9') || c == '-') {
        ++i_;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        std::string digits(s_.substr(start, i_ - start));
        if (digits == "-") return Error("Unknown token '-'", start);
        int64_t number = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
        if (ec != std::errc() || end != digits.data() + digits.size()) {
          return Error("Number out of range: " + digits, start);
        }
        out.push_back(Token{Tok::kNumber, digits, Json(number), start});
      } else if (c == '"') {
        HPOD_ASSIGN_OR_RETURN(std::string raw, ConsumeUntil('"'));
        Json name = Json::parse("\"" + raw + "\"", nullptr, false);
        if (!name.is_string()) return Error("Invalid quoted identifier \"" + raw + "\"", start);
        out.push_back(Token{Tok::kQuotedIdentifier, "\"" + raw + "\"", name, start});
      } else if (c == '<' || c == '>') {
        bool eq = peek(1) == '=';
        Tok t = c == '<' ? (eq ? Tok::kLte : Tok::kLt) : (eq ? Tok::kGte : Tok::kGt);
        simple(t, eq ? 2 : 1);
      } else if (c == '!') {
        peek(1) == '=' ? simple(Tok::kNe, 2) : simple(Tok::kNot, 1);
      } else if (c == '=') {
        if (peek(1) != '=') return Error("Unknown token '=', did you mean '=='?", start);
        simple(Tok::kEq, 2);
      } else {
        return Error("Unknown token '" + std::string(1, c) + "'", start);
      }
    }
    out.push_back(Token{Tok::kEof, "", Json(), s_.size()});
    return out;
  }

 private:
  static bool IsIdentStart(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

  static std::string Replace(std::string s, std::string_view from, std::string_view to) {
    size_t pos = 0;
    while ((pos = s.find(from, pos)) != std::string::npos) {
      s.replace(pos, from.size(), to);
      pos += to.size();
    }
    return s;
  }

  Status Error(const std::string& what, size_t at) const {
    return InvalidArgumentError(what + " at column " + std::to_string(at) + ":\n\"" +
                                std::string(s_) + "\"\n" + std::string(at + 1, ' ') + "^");
  }

  // Consumes from the opening delimiter to the matching unescaped one; returns the
  // text between them with escapes left in place (as jmespath.py's lexer does).
  StatusOr<std::string> ConsumeUntil(char delim) {
    size_t start = i_;
    ++i_;
    std::string buf;
    while (i_ < s_.size() && s_[i_] != delim) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) buf += s_[i_++];
      buf += s_[i_++];
    }
    if (i_ >= s_.size()) return Error("Unclosed " + std::string(1, delim) + " delimiter", start);
    ++i_;
    return buf;
  }

  std::string_view s_;
  size_t i_ = 0;
};

NodePtr MakeNode(NodeType type, std::vector<NodePtr> children = {}) {
  auto n = std::make_shared<Node>();
  n->type = type;
  n->children = std::move(children);
  return n;
}

// Thread contract: single use by one thread.
class Parser {
 public:
  Parser(std::string_view text, std::vector<Token> tokens)
      : text_(text), tokens_(std::move(tokens)) {}

  StatusOr<NodePtr> Parse() {
    HPOD_ASSIGN_OR_RETURN(NodePtr root, Expr(0));
    if (Current() != Tok::kEof) return Error("Unexpected token: " + TokName(Lookahead(0)));
    return root;
  }

 private:
  Tok Current() const { return Lookahead(0).type; }
  const Token& Lookahead(size_t k) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }

  Status Error(const std::string& what) const { return ErrorAt(what, Lookahead(0)); }

  Status ErrorAt(const std::string& what, const Token& t) const {
    std::string prefix = t.type == Tok::kEof ? "Incomplete expression" : what;
    return InvalidArgumentError(prefix + ":\n\"" + std::string(text_) + "\"\n" +
                                std::string(t.start + 1, ' ') + "^");
  }

  Status Match(Tok t, std::string_view expected) {
    if (Current() != t) {
      return Error("Expected " + std::string(expected) + ", got: " + TokName(Lookahead(0)));
    }
    Advance();
    return OkStatus();
  }

  StatusOr<NodePtr> Expr(int binding_power) {
    Token left_token = Lookahead(0);
    Advance();
    HPOD_ASSIGN_OR_RETURN(NodePtr left, Nud(left_token));
    while (binding_power < BindingPower(Current())) {
      Token t = Lookahead(0);
      Advance();
      HPOD_ASSIGN_OR_RETURN(left, Led(t, std::move(left)));
    }
    return left;
  }

  StatusOr<NodePtr> Nud(const Token& t) {
    switch (t.type) {
      case Tok::kLiteral: {
        NodePtr n = MakeNode(NodeType::kLiteral);
        n->value = t.value;
        return n;
      }
      case Tok::kUnquotedIdentifier:
      case Tok::kQuotedIdentifier: {
        if (Current() == Tok::kLparen) {
          return Error("Functions are not supported by hpod's JMESPath subset");
        }
        NodePtr n = MakeNode(NodeType::kField);
        n->name = t.value.get<std::string>();
        return n;
      }
      case Tok::kStar: {
        NodePtr right = MakeNode(NodeType::kIdentity);
        if (Current() != Tok::kRbracket) {
          HPOD_ASSIGN_OR_RETURN(right, ProjectionRhs(BindingPower(Tok::kStar)));
        }
        return MakeNode(NodeType::kValueProjection, {MakeNode(NodeType::kIdentity), right});
      }
      case Tok::kFilter:
        return LedFilter(MakeNode(NodeType::kIdentity));
      case Tok::kLbrace:
        return MultiSelectHash();
      case Tok::kLparen: {
        HPOD_ASSIGN_OR_RETURN(NodePtr e, Expr(0));
        HPOD_RETURN_IF_ERROR(Match(Tok::kRparen, "')'"));
        return e;
      }
      case Tok::kFlatten: {
        NodePtr left = MakeNode(NodeType::kFlatten, {MakeNode(NodeType::kIdentity)});
        HPOD_ASSIGN_OR_RETURN(NodePtr right, ProjectionRhs(BindingPower(Tok::kFlatten)));
        return MakeNode(NodeType::kProjection, {left, right});
      }
      case Tok::kNot: {
        HPOD_ASSIGN_OR_RETURN(NodePtr e, Expr(BindingPower(Tok::kNot)));
        return MakeNode(NodeType::kNot, {e});
      }
      case Tok::kLbracket: {
        if (Current() == Tok::kNumber || Current() == Tok::kColon) {
          HPOD_ASSIGN_OR_RETURN(NodePtr right, IndexExpression());
          return ProjectIfSlice(MakeNode(NodeType::kIdentity), right);
        }
        if (Current() == Tok::kStar && Lookahead(1).type == Tok::kRbracket) {
          Advance();
          Advance();
          HPOD_ASSIGN_OR_RETURN(NodePtr right, ProjectionRhs(BindingPower(Tok::kStar)));
          return MakeNode(NodeType::kProjection, {MakeNode(NodeType::kIdentity), right});
        }
        return MultiSelectList();
      }
      case Tok::kCurrent:
        return MakeNode(NodeType::kCurrent);
      case Tok::kExpref:
        return Error("Expression references (&) are not supported by hpod's JMESPath subset");
      default:
        return ErrorAt("Unexpected token: " + TokName(t), t);
    }
  }

  StatusOr<NodePtr> Led(const Token& t, NodePtr left) {
    switch (t.type) {
      case Tok::kDot: {
        if (Current() != Tok::kStar) {
          HPOD_ASSIGN_OR_RETURN(NodePtr right, DotRhs(BindingPower(Tok::kDot)));
          if (left->type == NodeType::kSubexpression) {
            left->children.push_back(right);
            return left;
          }
          return MakeNode(NodeType::kSubexpression, {left, right});
        }
        Advance();
        HPOD_ASSIGN_OR_RETURN(NodePtr right, ProjectionRhs(BindingPower(Tok::kDot)));
        return MakeNode(NodeType::kValueProjection, {left, right});
      }
      case Tok::kPipe:
      case Tok::kOr:
      case Tok::kAnd: {
        HPOD_ASSIGN_OR_RETURN(NodePtr right, Expr(BindingPower(t.type)));
        NodeType type = t.type == Tok::kPipe ? NodeType::kPipe
                        : t.type == Tok::kOr ? NodeType::kOr
                                             : NodeType::kAnd;
        return MakeNode(type, {left, right});
      }
      case Tok::kLparen:
        return Error("Functions are not supported by hpod's JMESPath subset");
      case Tok::kFilter:
        return LedFilter(left);
      case Tok::kEq:
      case Tok::kNe:
      case Tok::kGt:
      case Tok::kGte:
      case Tok::kLt:
      case Tok::kLte: {
        HPOD_ASSIGN_OR_RETURN(NodePtr right, Expr(BindingPower(t.type)));
        NodePtr n = MakeNode(NodeType::kComparator, {left, right});
        n->name = t.text;
        return n;
      }
      case Tok::kFlatten: {
        NodePtr flat = MakeNode(NodeType::kFlatten, {left});
        HPOD_ASSIGN_OR_RETURN(NodePtr right, ProjectionRhs(BindingPower(Tok::kFlatten)));
        return MakeNode(NodeType::kProjection, {flat, right});
      }
      case Tok::kLbracket: {
        if (Current() == Tok::kNumber || Current() == Tok::kColon) {
          HPOD_ASSIGN_OR_RETURN(NodePtr right, IndexExpression());
          if (left->type == NodeType::kIndexExpression) {
            left->children.push_back(right);
            return left;
          }
          return ProjectIfSlice(left, right);
        }
        HPOD_RETURN_IF_ERROR(Match(Tok::kStar, "'*'"));
        HPOD_RETURN_IF_ERROR(Match(Tok::kRbracket, "']'"));
        HPOD_ASSIGN_OR_RETURN(NodePtr right, ProjectionRhs(BindingPower(Tok::kStar)));
        return MakeNode(NodeType::kProjection, {left, right});
      }
      default:
        return ErrorAt("Unexpected token: " + TokName(t), t);
    }
  }

  StatusOr<NodePtr> LedFilter(NodePtr left) {
    HPOD_ASSIGN_OR_RETURN(NodePtr condition, Expr(0));
    HPOD_RETURN_IF_ERROR(Match(Tok::kRbracket, "']'"));
    NodePtr right = MakeNode(NodeType::kIdentity);
    if (Current() != Tok::kFlatten) {
      HPOD_ASSIGN_OR_RETURN(right, ProjectionRhs(BindingPower(Tok::kFilter)));
    }
    return MakeNode(NodeType::kFilterProjection, {left, right, condition});
  }

  StatusOr<NodePtr> ProjectIfSlice(NodePtr left, NodePtr right) {
    bool is_slice = right->type == NodeType::kSlice;
    NodePtr index_expr = MakeNode(NodeType::kIndexExpression, {left, right});
    if (!is_slice) return index_expr;
    HPOD_ASSIGN_OR_RETURN(NodePtr rhs, ProjectionRhs(BindingPower(Tok::kStar)));
    return MakeNode(NodeType::kProjection, {index_expr, rhs});
  }

  StatusOr<NodePtr> IndexExpression() {
    if (Current() == Tok::kColon || Lookahead(1).type == Tok::kColon) return SliceExpression();
    NodePtr n = MakeNode(NodeType::kIndex);
    n->value = Lookahead(0).value;
    Advance();
    HPOD_RETURN_IF_ERROR(Match(Tok::kRbracket, "']'"));
    return n;
  }

  StatusOr<NodePtr> SliceExpression() {
    NodePtr n = MakeNode(NodeType::kSlice);
    int index = 0;
    while (Current() != Tok::kRbracket && index < 3) {
      if (Current() == Tok::kColon) {
        ++index;
        if (index == 3) return Error("Syntax error");
        Advance();
      } else if (Current() == Tok::kNumber) {
        n->slice[index] = Lookahead(0).value.get<int64_t>();
        Advance();
      } else {
        return Error("Syntax error");
      }
    }
    HPOD_RETURN_IF_ERROR(Match(Tok::kRbracket, "']'"));
    return n;
  }

  StatusOr<NodePtr> ProjectionRhs(int binding_power) {
    if (BindingPower(Current()) < kProjectionStop) return MakeNode(NodeType::kIdentity);
    if (Current() == Tok::kLbracket || Current() == Tok::kFilter) return Expr(binding_power);
    if (Current() == Tok::kDot) {
      Advance();
      return DotRhs(binding_power);
    }
    return Error("Syntax error");
  }

  StatusOr<NodePtr> DotRhs(int binding_power) {
    Tok t = Current();
    if (t == Tok::kQuotedIdentifier || t == Tok::kUnquotedIdentifier || t == Tok::kStar) {
      return Expr(binding_power);
    }
    if (t == Tok::kLbracket) {
      Advance();
      return MultiSelectList();
    }
    if (t == Tok::kLbrace) {
      Advance();
      return MultiSelectHash();
    }
    return Error("Expected identifier, '*', '[' or '{' after '.', got: " + TokName(Lookahead(0)));
  }

  StatusOr<NodePtr> MultiSelectList() {
    NodePtr n = MakeNode(NodeType::kMultiSelectList);
    while (true) {
      HPOD_ASSIGN_OR_RETURN(NodePtr e, Expr(0));
      n->children.push_back(e);
      if (Current() == Tok::kRbracket) break;
      HPOD_RETURN_IF_ERROR(Match(Tok::kComma, "','"));
    }
    HPOD_RETURN_IF_ERROR(Match(Tok::kRbracket, "']'"));
    return n;
  }

  StatusOr<NodePtr> MultiSelectHash() {
    NodePtr n = MakeNode(NodeType::kMultiSelectHash);
    while (true) {
      const Token& key = Lookahead(0);
      if (key.type != Tok::kQuotedIdentifier && key.type != Tok::kUnquotedIdentifier) {
        return Error("Expected a key name, got: " + TokName(key));
      }
      std::string name = key.value.get<std::string>();
      Advance();
      HPOD_RETURN_IF_ERROR(Match(Tok::kColon, "':'"));
      HPOD_ASSIGN_OR_RETURN(NodePtr value, Expr(0));
      n->keys.push_back(std::move(name));
      n->children.push_back(value);
      if (Current() == Tok::kComma) {
        Advance();
      } else if (Current() == Tok::kRbrace) {
        Advance();
        break;
      }
    }
    return n;
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<Expression> Expression::Compile(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgumentError("Invalid jmespath expression: Empty expression");
  }
  Lexer lexer(text);
  StatusOr<std::vector<Token>> tokens = lexer.Tokenize();
  if (!tokens.ok()) {
    return InvalidArgumentError("Invalid jmespath expression: " + tokens.status().message());
  }
  Parser parser(text, *std::move(tokens));
  StatusOr<NodePtr> root = parser.Parse();
  if (!root.ok()) {
    return InvalidArgumentError("Invalid jmespath expression: " + root.status().message());
  }
  return Expression(std::string(text), *std::move(root));
}

}  // namespace hpod::cli
