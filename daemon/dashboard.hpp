#pragma once
// The daemon's dashboard: one self-contained HTML page (inline CSS and JavaScript, no
// external fetches) that the HTTP server answers `GET /` with. The page polls the API
// (docs/daemon.md) for the queue, the selected task's speedup by round and its
// decisions; a daemon with a token is opened as http://HOST:PORT/#token=TOKEN.
// The source is daemon/dashboard/index.html, embedded at build time.

#include <string_view>

namespace ks {

// The page's bytes (UTF-8 HTML); valid for the life of the program.
std::string_view dashboard_page();

}  // namespace ks
