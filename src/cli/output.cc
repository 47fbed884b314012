#include "hpod/cli/output.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "hpod/cli/params.h"

namespace hpod::cli {
namespace {

using Json = nlohmann::ordered_json;

bool IsScalar(const Json& v) { return !v.is_array() && !v.is_object(); }

// Python truthiness, which decides whether the table formatter draws anything.
bool PyFalsy(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0.0;
  if (v.is_string()) return v.get_ref<const std::string&>().empty();
  return v.empty();
}

// --- text (awscli/text.py) ---------------------------------------------------

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// Thread contract: single use by one thread.
class TextWriter {
 public:
  void Format(const Json& item, const std::string* identifier,
              const std::vector<std::string>* scalar_keys) {
    if (item.is_object()) {
      FormatDict(scalar_keys, item, identifier);
    } else if (item.is_array()) {
      FormatList(item, identifier);
    } else {
      out += PyStr(item) + "\n";
    }
  }

  std::string out;

 private:
  void FormatList(const Json& item, const std::string* identifier) {
    if (item.empty()) return;
    bool any_dict =
        std::any_of(item.begin(), item.end(), [](const Json& e) { return e.is_object(); });
    bool any_list =
        std::any_of(item.begin(), item.end(), [](const Json& e) { return e.is_array(); });
    if (any_dict) {
      std::vector<std::string> all_keys = AllScalarKeys(item);
      for (const auto& element : item) Format(element, identifier, &all_keys);
    } else if (any_list) {
      Json scalars = Json::array();
      std::vector<const Json*> non_scalars;
      for (const auto& e : item) {
        if (IsScalar(e)) {
          scalars.push_back(e);
        } else {
          non_scalars.push_back(&e);
        }
      }
      if (!scalars.empty()) FormatScalarList(scalars, identifier);
      for (const Json* e : non_scalars) Format(*e, identifier, nullptr);
    } else {
      FormatScalarList(item, identifier);
    }
  }

  void FormatScalarList(const Json& elements, const std::string* identifier) {
    if (identifier != nullptr) {
      for (const auto& e : elements) out += Upper(*identifier) + "\t" + PyStr(e) + "\n";
      return;
    }
    std::string line;
    for (size_t i = 0; i < elements.size(); ++i) line += (i ? "\t" : "") + PyStr(elements[i]);
    out += line + "\n";
  }

  void FormatDict(const std::vector<std::string>* scalar_keys, const Json& item,
                  const std::string* identifier) {
    std::vector<std::string> scalars;
    std::vector<std::pair<std::string, const Json*>> non_scalars;
    if (scalar_keys == nullptr) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : item.items()) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      for (const auto& k : keys) {
        const Json& v = item[k];
        if (IsScalar(v)) {
          scalars.push_back(PyStr(v));
        } else {
          non_scalars.emplace_back(k, &v);
        }
      }
    } else {
      for (const auto& k : *scalar_keys) {
        auto it = item.find(k);
        scalars.push_back(it == item.end() ? std::string() : PyStr(*it));
      }
      std::set<std::string> remaining;
      for (const auto& [k, v] : item.items()) {
        if (std::find(scalar_keys->begin(), scalar_keys->end(), k) == scalar_keys->end()) {
          remaining.insert(k);
        }
      }
      for (const auto& k : remaining) non_scalars.emplace_back(k, &item[k]);
    }
    if (!scalars.empty()) {
      if (identifier != nullptr) scalars.insert(scalars.begin(), Upper(*identifier));
      std::string line;
      for (size_t i = 0; i < scalars.size(); ++i) line += (i ? "\t" : "") + scalars[i];
      out += line + "\n";
    }
    for (const auto& [k, v] : non_scalars) Format(*v, &k, nullptr);
  }

  static std::vector<std::string> AllScalarKeys(const Json& list_of_dicts) {
    std::set<std::string> keys;
    for (const auto& d : list_of_dicts) {
      if (!d.is_object()) continue;
      for (const auto& [k, v] : d.items()) {
        if (IsScalar(v)) keys.insert(k);
      }
    }
    return {keys.begin(), keys.end()};
  }
};

// --- table (awscli/table.py) ---------------------------------------------------

// Display width: East Asian Wide and Fullwidth code points count 2 (a subset of
// Python's unicodedata table covering CJK, Hangul and fullwidth forms).
int TextLength(const std::string& s) {
  int width = 0;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else if (c >= 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xC0) {
      len = 2;
      cp = c & 0x1F;
    }
    for (size_t k = 1; k < len && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    i += len;
    bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) ||
                (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
                (cp >= 0x20000 && cp <= 0x3FFFD);
    width += wide ? 2 : 1;
  }
  return width;
}

std::string Repeat(char c, int n) { return n > 0 ? std::string(static_cast<size_t>(n), c) : ""; }

std::string CenterText(const std::string& text, int length, const std::string& left_edge,
                       const std::string& right_edge) {
  int text_length = TextLength(text);
  int char_start = (length / 2) - (text_length / 2) - 1;
  std::string out = left_edge + Repeat(' ', char_start) + text;
  int so_far = TextLength(left_edge) + char_start + text_length;
  out += Repeat(' ', length - TextLength(right_edge) - so_far);
  return out + right_edge;
}

std::string AlignLeft(const std::string& text, int length, const std::string& left_edge,
                      const std::string& right_edge) {
  constexpr int kLeftPadding = 2;
  int text_length = TextLength(text);
  int computed = text_length + kLeftPadding + TextLength(left_edge) + TextLength(right_edge);
  int padding = length - computed >= 0 ? kLeftPadding : 0;
  int so_far = static_cast<int>(left_edge.size()) + padding + text_length;
  return left_edge + Repeat(' ', padding) + text +
         Repeat(' ', length - so_far - static_cast<int>(right_edge.size())) + right_edge;
}

// One titled box of a table. Thread contract: a plain value.
struct Section {
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  int indent_level = 0;
  std::vector<int> max_widths;

  void AddHeader(std::vector<std::string> h) {
    UpdateMaxWidths(h);
    headers = std::move(h);
  }
  void AddRow(const std::vector<std::string>& row) {
    rows.push_back(row);
    UpdateMaxWidths(row);
  }
  void UpdateMaxWidths(const std::vector<std::string>& row) {
    if (max_widths.empty()) {
      for (const auto& e : row) max_widths.push_back(TextLength(e));
      return;
    }
    for (size_t i = 0; i < row.size() && i < max_widths.size(); ++i) {
      max_widths[i] = std::max(max_widths[i], TextLength(row[i]));
    }
  }

  std::vector<int> ColumnWidths(int padding, std::optional<int> max_width) const {
    std::vector<int> unscaled;
    for (int w : max_widths) unscaled.push_back(w + padding);
    if (!max_width.has_value() || unscaled.empty()) return unscaled;
    int sum = 0;
    for (int w : unscaled) sum += w;
    double scale = *max_width / static_cast<double>(sum);
    std::vector<int> scaled;
    // Python's round() is half-to-even, as nearbyint is in the default mode.
    for (int w : unscaled) scaled.push_back(static_cast<int>(std::nearbyint(scale * w)));
    int off_by = -*max_width;
    for (int w : scaled) off_by += w;
    auto n = static_cast<int>(scaled.size());
    while (off_by != 0) {
      for (int k = 0; k < n; ++k) {
        int i = off_by < 0 ? n - 1 - k : k;
        if (off_by > 0) {
          --scaled[static_cast<size_t>(i)];
          --off_by;
        } else {
          ++scaled[static_cast<size_t>(i)];
          ++off_by;
        }
        if (off_by == 0) break;
      }
    }
    return scaled;
  }

  int TotalWidth(int padding, int outer_padding) const {
    int total = 0;
    for (int w : ColumnWidths(0, std::nullopt)) total += w + padding;
    total += 2 + 2 * outer_padding;
    return std::max(TextLength(title) + 2 + 2 * outer_padding, total);
  }
};

// Thread contract: single use by one thread.
class TableBuilder {
 public:
  bool Build(const std::string* title, const Json& current, int indent_level) {
    if (PyFalsy(current)) return false;
    if (title != nullptr) NewSection(*title, indent_level);
    if (current.is_array()) {
      if (current[0].is_object()) {
        SubTableFromList(current, indent_level, title);
      } else {
        for (const auto& item : current) {
          if (IsScalar(item)) {
            Current().AddRow({PyStr(item)});
          } else if (AllScalar(item)) {
            std::vector<std::string> row;
            // Iterating a Python dict yields its keys; awscli relies on that here.
            if (item.is_object()) {
              for (const auto& [k, v] : item.items()) row.push_back(k);
            } else {
              for (const auto& e : item) row.push_back(PyStr(e));
            }
            Current().AddRow(row);
          } else {
            Build(nullptr, item, 0);
          }
        }
      }
    }
    if (current.is_object()) SubTableFromDict(current, indent_level);
    return true;
  }

  std::string Render(int terminal_width) {
    int max_width = MaxWidth();
    if (max_width > terminal_width) {
      ConvertToVertical();
      max_width = MaxWidth();
    }
    out_ = Repeat('-', max_width) + "\n";
    for (const Section& s : sections_) RenderSection(s, max_width);
    return out_;
  }

 private:
  static bool AllScalar(const Json& item) {
    if (item.is_object()) return true;  // keys are strings
    return std::all_of(item.begin(), item.end(), [](const Json& e) { return IsScalar(e); });
  }

  Section& Current() {
    if (sections_.empty()) sections_.emplace_back();
    return sections_.back();
  }

  void NewSection(const std::string& title, int indent_level) {
    sections_.emplace_back();
    sections_.back().title = title;
    sections_.back().indent_level = indent_level;
  }

  static std::pair<std::vector<std::string>, std::vector<std::string>> GroupScalarKeys(
      const Json& d) {
    std::vector<std::string> headers, more;
    for (const auto& [k, v] : d.items()) (IsScalar(v) ? headers : more).push_back(k);
    std::sort(headers.begin(), headers.end());
    std::sort(more.begin(), more.end());
    return {headers, more};
  }

  void SubTableFromDict(const Json& current, int indent_level) {
    auto [headers, more] = GroupScalarKeys(current);
    if (headers.size() == 1) {
      Current().AddRow({headers[0], PyStr(current[headers[0]])});
    } else if (!headers.empty()) {
      Current().AddHeader(headers);
      std::vector<std::string> row;
      for (const auto& h : headers) row.push_back(PyStr(current[h]));
      Current().AddRow(row);
    }
    for (const auto& k : more) Build(&k, current[k], indent_level + 1);
  }

  void SubTableFromList(const Json& current, int indent_level, const std::string* title) {
    std::set<std::string> header_set, more_set;
    for (const auto& item : current) {
      if (!item.is_object()) continue;
      auto [h, m] = GroupScalarKeys(item);
      header_set.insert(h.begin(), h.end());
      more_set.insert(m.begin(), m.end());
    }
    std::vector<std::string> headers(header_set.begin(), header_set.end());
    std::vector<std::string> more(more_set.begin(), more_set.end());
    Current().AddHeader(headers);
    bool first = true;
    for (const auto& element : current) {
      if (!first && !more.empty()) {
        NewSection(title != nullptr ? *title : std::string(), indent_level);
        Current().AddHeader(headers);
      }
      first = false;
      std::vector<std::string> row;
      for (const auto& h : headers) {
        auto it = element.is_object() ? element.find(h) : element.end();
        row.push_back(element.is_object() && it != element.end() ? PyStr(*it) : std::string());
      }
      Current().AddRow(row);
      if (!element.is_object()) continue;
      for (const auto& k : more) {
        if (element.contains(k)) Build(&k, element[k], indent_level + 1);
      }
    }
  }

  int MaxWidth() const {
    int max_width = 0;
    for (const Section& s : sections_)
      max_width = std::max(max_width, s.TotalWidth(4, s.indent_level));
    return max_width;
  }

  void ConvertToVertical() {
    for (Section& s : sections_) {
      if (s.rows.size() != 1 || s.headers.empty()) continue;
      Section vertical;
      vertical.title = s.title;
      vertical.indent_level = s.indent_level;
      for (size_t i = 0; i < s.headers.size() && i < s.rows[0].size(); ++i) {
        vertical.AddRow({s.headers[i], s.rows[0][i]});
      }
      s = std::move(vertical);
    }
  }

  // IndentedStream.write: each line framed by indent_level '|' on both sides.
  void WriteLine(const Section& s, const std::string& line) {
    std::string bars = Repeat('|', s.indent_level);
    out_ += bars + line + bars + "\n";
  }

  void WriteLineBreak(const Section& s, const std::vector<int>& widths) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      line += i == 0 ? "+" + Repeat('-', widths[i] - 2) + "+" : Repeat('-', widths[i] - 1) + "+";
    }
    WriteLine(s, line);
  }

  void RenderSection(const Section& s, int max_width) {
    max_width -= s.indent_level * 2;
    if (!s.title.empty()) {
      WriteLine(s, CenterText(s.title, max_width, "|", "|"));
      if (s.headers.empty() && s.rows.empty()) {
        WriteLine(s, "+" + Repeat('-', max_width - 2) + "+");
      }
    }
    if (!s.headers.empty()) {
      std::vector<int> widths = s.ColumnWidths(4, max_width);
      std::string line;
      for (size_t i = 0; i < widths.size() && i < s.headers.size(); ++i) {
        line += CenterText(s.headers[i], widths[i], i == 0 ? "|" : "", "|");
      }
      WriteLineBreak(s, widths);
      WriteLine(s, line);
    }
    if (s.rows.empty()) return;
    std::vector<int> widths = s.ColumnWidths(4, max_width);
    if (widths.empty()) return;
    WriteLineBreak(s, widths);
    for (const auto& row : s.rows) {
      std::string line;
      for (size_t i = 0; i < widths.size() && i < row.size(); ++i) {
        line += AlignLeft(row[i], widths[i], i == 0 ? "|" : "", "|");
      }
      WriteLine(s, line);
    }
    WriteLineBreak(s, widths);
  }

  std::vector<Section> sections_;
  std::string out_;
};

Json Apply(const Expression* query, const Json& value) {
  return query == nullptr ? value : query->Search(value);
}

}  // namespace

StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "json") return OutputFormat::kJson;
  if (name == "text") return OutputFormat::kText;
  if (name == "table") return OutputFormat::kTable;
  return InvalidArgumentError("Unknown output type: " + std::string(name));
}

std::string FormatJson(const nlohmann::ordered_json& value) {
  if (value.is_object() && value.empty()) return "";
  return value.dump(4, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string FormatText(const nlohmann::ordered_json& value) {
  TextWriter writer;
  writer.Format(value, nullptr, nullptr);
  return writer.out;
}

std::string FormatTable(std::string_view title, const nlohmann::ordered_json& value,
                        const TableOptions& options) {
  TableBuilder builder;
  std::string t(title);
  if (!builder.Build(&t, value, 0)) return "";
  return builder.Render(options.terminal_width);
}

std::string FormatResponse(const FormatRequest& request, const nlohmann::ordered_json& response) {
  Json value = Apply(request.query, response);
  switch (request.format) {
    case OutputFormat::kJson:
      return FormatJson(value);
    case OutputFormat::kText:
      return FormatText(value);
    case OutputFormat::kTable:
      return FormatTable(request.title, value, request.table);
  }
  return "";
}

std::string FormatPaginated(const FormatRequest& request, const PaginatedOutput& output) {
  if (request.format != OutputFormat::kText) return FormatResponse(request, output.merged);
  std::string out;
  for (const Json& page : output.pages) {
    // Page 0 would also carry the paginator's non-aggregate keys; SageMaker's
    // paginators declare none.
    Json current = Json::object();
    for (const std::string& key : output.result_keys) {
      auto it = page.find(key);
      current[key] = it == page.end() ? Json(nullptr) : *it;
    }
    out += FormatText(Apply(request.query, current));
  }
  if (output.resume_token.has_value()) {
    Json token = {{"NextToken", {{"NextToken", *output.resume_token}}}};
    out += FormatText(Apply(request.query, token));
  }
  return out;
}

}  // namespace hpod::cli
