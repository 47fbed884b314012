#include "hpod/base/logging.h"

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <vector>

namespace hpod {

void InitLogging(const LoggingOptions& options) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!options.file.empty()) {
    sinks.push_back(
        std::make_shared<spdlog::sinks::rotating_file_sink_mt>(options.file, 10 * 1024 * 1024, 5));
  }
  auto logger = std::make_shared<spdlog::logger>(options.program, sinks.begin(), sinks.end());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %n[%t] %v");
  logger->set_level(spdlog::level::from_str(options.level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace hpod
