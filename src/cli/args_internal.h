#pragma once

// Private to hpod_cli: what the parts of the command-line parser share. args.cc
// holds the entry point (global options, verb dispatch, names); args_values.cc
// turns an option's words into a member value by its shape; args_commands.cc
// parses each command's own options (model operations, wait, start-session,
// logs, inject-fault, create-join-token).
//
// Thread contract: pure functions, like args.h.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/api/model.h"
#include "hpod/base/status.h"
#include "hpod/cli/args.h"

namespace hpod::cli::internal {

// "--name" or "--name=value" (not "-h", not "--").
bool IsOption(const std::string& word);

// Strict integer: optional sign and digits, nothing else (no spaces, no "1e3").
std::optional<int64_t> ParseInt(std::string_view s);

// kInvalidArgument "Error parsing parameter '<cli_name>': <message>" (the CLI's
// ParamError, printed without the usage synopsis).
Status ParamError(const std::string& cli_name, const std::string& message);

// A usage error "argument <option>: Invalid choice: ..." unless `value` is one of
// `choices`.
Status CheckChoice(std::string_view option, const std::string& value,
                   std::initializer_list<std::string_view> choices);

// Collects the words of one option: its "=value" or the following non-option
// words (all of them when `many`), advancing `i` past them.
std::vector<std::string> TakeValues(const std::vector<std::string>& words, size_t& i,
                                    const std::optional<std::string>& inline_value, bool many);

// One member's value from its words (awscli's unpack_cli_arg + shorthand hook):
// file:// and fileb:// values, scalars, lists, JSON or shorthand structures.
StatusOr<Json> ParseMemberValue(const std::string& cli_name, std::vector<std::string> words,
                                const api::Shape& shape, const Environment& env);

// A duration option's value in seconds (create-join-token --ttl): base's
// ParseDurationSeconds (hpod/base/duration.h: "90s", "30m", "1h", "7d", "1h30m"
// or plain seconds, between min_s and max_s), whose refusal becomes a usage
// error, e.g. `--ttl: "1x" is not a duration; use e.g. 90s, 30m, 1h or 7d`.
StatusOr<int64_t> ParseDurationSeconds(std::string_view option, std::string_view value,
                                       int64_t min_s, int64_t max_s);

// Each command's options after the verb, into `inv` (which ParseCommandLine has
// filled with the globals, the operation or the waiter). "help" among them turns
// `inv` into a help request.
Status ParseOperationArgs(const std::vector<std::string>& words, const Environment& env,
                          Invocation& inv);
Status ParseWaitArgs(const std::vector<std::string>& words, Invocation& inv);
Status ParseStartSessionArgs(const std::vector<std::string>& words, bool help, Invocation& inv);
Status ParseLogsArgs(const std::vector<std::string>& words, bool help, Invocation& inv);
Status ParseInjectFaultArgs(const std::vector<std::string>& words, bool help, Invocation& inv);
Status ParseCreateJoinTokenArgs(const std::vector<std::string>& words, bool help,
                                Invocation& inv);
Status ParseDescribeJobGoodputArgs(const std::vector<std::string>& words, bool help,
                                   Invocation& inv);
Status ParseDescribeRecoveryArgs(const std::vector<std::string>& words, bool help, Invocation& inv);

}  // namespace hpod::cli::internal
