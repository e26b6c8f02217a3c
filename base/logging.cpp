#include "base/logging.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <vector>

namespace ks {

status setup_logging(const std::string& level, const std::string& file) {
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
  spdlog::level::level_enum lvl = spdlog::level::info;
  bool known = false;
  for (auto* n : names) {
    if (level == n) {
      lvl = spdlog::level::from_str(level);
      known = true;
    }
  }
  if (!known)
    return ks::error{"unknown log level '" + level + "': expected one of trace, debug, info, warn, error, off"};
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file));
    } catch (const spdlog::spdlog_ex& e) {
      return ks::error{"cannot open log file '" + file + "': " + e.what()};
    }
  }
  auto logger = std::make_shared<spdlog::logger>("kernelskill", sinks.begin(), sinks.end());
  logger->set_level(lvl);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  return status::success();
}

}  // namespace ks
