#pragma once

// The AWS CLI's three output formats, ported from awscli/formatter.py, text.py and
// table.py so that scripts written against `aws sagemaker ... --output text` and
// eyes used to `--output table` see the same bytes:
//
//   json   4-space indent, keys in the order given (ParseResponse puts them in
//          model order, as botocore does), non-ASCII unescaped; nothing for {}.
//   text   one tab-separated line per structure, first column the enclosing key
//          upper-cased, scalar columns sorted by key; lists of scalars as
//          "KEY\tvalue" lines or one tab-joined line when bare.
//   table  a box per structure titled with the operation name (then the member
//          names), scalar columns sorted by key, single-row sections turned
//          vertical when the table is wider than the terminal.
//
// Values print like Python's str() (True, None, 1700000000.5). Colour and East
// Asian "ambiguous" widths are not reproduced (see README.md).
//
// Thread contract: pure functions.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/cli/jmespath.h"

namespace hpod::cli {

enum class OutputFormat { kJson, kText, kTable };

// "json" | "text" | "table"; kInvalidArgument otherwise.
StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

// json.dump(indent=4, ensure_ascii=False) plus a newline; "" for an empty object.
std::string FormatJson(const nlohmann::ordered_json& value);

// awscli.text.format_text.
std::string FormatText(const nlohmann::ordered_json& value);

struct TableOptions {
  // Columns available; the AWS CLI uses the terminal's width, 80 when stdout is
  // not a terminal.
  int terminal_width = 80;
};
// awscli's TableFormatter; "" when `value` is falsy in Python's sense.
std::string FormatTable(std::string_view title, const nlohmann::ordered_json& value,
                        const TableOptions& options = {});

// What a command printed to stdout in one format, the query applied.
struct FormatRequest {
  OutputFormat format = OutputFormat::kJson;
  const Expression* query = nullptr;  // --query, may be null
  std::string title;                  // operation name (table title)
  TableOptions table;
};

// Formats a complete response (or a merged paginated result).
std::string FormatResponse(const FormatRequest& request, const nlohmann::ordered_json& response);

// The pages of a paginated call as the AWS CLI prints them. text is printed page by
// page (query applied to each page, then to {"NextToken": {"NextToken": resume}}),
// exactly like awscli's TextFormatter; json and table print `merged`.
struct PaginatedOutput {
  std::vector<nlohmann::ordered_json> pages;  // already truncated for --max-items
  std::vector<std::string> result_keys;       // paginator result keys
  nlohmann::ordered_json merged;              // build_full_result()
  std::optional<std::string> resume_token;    // the --max-items NextToken
};
std::string FormatPaginated(const FormatRequest& request, const PaginatedOutput& output);

}  // namespace hpod::cli
