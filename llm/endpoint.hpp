#pragma once
// Where an LLM API lives: the parsed form of `coder.llm.endpoint` and the path each
// provider's request goes to (docs/llm.md, "Endpoints").
//
// An endpoint is a base URL: `http(s)://HOST[:PORT][/BASE/PATH]`, IPv6 hosts in
// brackets. A user part, a query or a fragment is refused: an API key belongs in the
// environment variable named by `coder.llm.api_key_env`, never in the URL.

#include <cstdint>
#include <string>

#include "base/result.hpp"

namespace ks {

struct endpoint_url {
  std::string scheme;     // "http" or "https"
  std::string host;       // without brackets for IPv6
  uint16_t port = 0;      // the explicit port, or 80 / 443
  std::string base_path;  // "" or "/v1" — starts with '/', no trailing '/'

  // "http://127.0.0.1:8080": what httplib::Client is constructed with.
  std::string origin() const;
  // origin() + base_path: the URL as a person reads it (for messages).
  std::string to_string() const;
};

// Parses a base URL. The error names what is wrong ("endpoint 'ftp://x': the scheme
// must be http or https").
result<endpoint_url> parse_endpoint(const std::string& url);

// The request path for `provider` ("openai" | "anthropic") under `base`:
//   openai:    BASE/chat/completions  (BASE as OpenAI's SDKs take it: ".../v1")
//   anthropic: BASE/v1/messages, or BASE/messages when BASE already ends in /v1
// A BASE that already ends in the full path (/chat/completions, /messages) is used
// as it is, so a URL copied from an API reference works too.
std::string request_path(const std::string& provider, const endpoint_url& base);

}  // namespace ks
