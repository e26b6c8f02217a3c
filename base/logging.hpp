#pragma once
// Logging for both programs: spdlog to stderr (and optionally a file), at a level
// named trace, debug, info, warn, error or off. The level comes from the config's
// logging.level and is overridden by --log-level on the command line.

#include <string>

#include "base/result.hpp"

namespace ks {

// Installs the default logger. An unknown level or an unwritable file is an error
// that names it; the previous logger stays in place then.
status setup_logging(const std::string& level, const std::string& file = "");

}  // namespace ks
