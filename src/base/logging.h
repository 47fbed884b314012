#pragma once

// Logging setup. Code logs through spdlog's default logger (spdlog::info(...)).
// Secrets (secret keys, signatures, tokens) are never passed to a logger.
//
// Thread contract: InitLogging is called once by a composition root before threads
// start; spdlog's loggers are thread-safe afterwards.

#include <string>

namespace hpod {

struct LoggingOptions {
  // "trace", "debug", "info", "warn", "error".
  std::string level = "info";
  // When non-empty, logs also go to this file (rotated at 10 MiB, 5 files).
  std::string file;
  // Program name shown in each line.
  std::string program = "hpod";
};

void InitLogging(const LoggingOptions& options);

}  // namespace hpod
