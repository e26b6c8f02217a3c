#include "llm/endpoint.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace ks {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string endpoint_url::origin() const {
  const bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string endpoint_url::to_string() const { return origin() + base_path; }

result<endpoint_url> parse_endpoint(const std::string& url) {
  auto fail = [&](const std::string& why) { return ks::error{"endpoint '" + url + "': " + why}; };
  endpoint_url out;
  const auto sep = url.find("://");
  if (sep == std::string::npos) return fail("not a URL; expected http://HOST[:PORT][/PATH] or https://...");
  out.scheme = lower(url.substr(0, sep));
  if (out.scheme != "http" && out.scheme != "https")
    return fail("the scheme must be http or https, not '" + out.scheme + "'");
  std::string rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string::npos) return fail("a query or fragment is not allowed in a base URL");
  const auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos)
    return fail(
        "credentials in the URL are not allowed; put the API key in the "
        "environment variable named by coder.llm.api_key_env");
  if (authority.empty()) return fail("the host is missing");

  std::string port_text;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) return fail("'[' of an IPv6 host is never closed");
    out.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("unexpected '" + after + "' after the host");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("the port after ':' is missing");
    }
  } else {
    const auto colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("the port after ':' is missing");
    }
  }
  if (out.host.empty()) return fail("the host is missing");
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc{} || p != port_text.data() + port_text.size() || value < 1 || value > 65535)
      return fail("the port '" + port_text + "' is not a number in 1-65535");
    out.port = static_cast<uint16_t>(value);
  } else {
    out.port = out.scheme == "https" ? 443 : 80;
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  out.base_path = path;
  return out;
}

std::string request_path(const std::string& provider, const endpoint_url& base) {
  const std::string& p = base.base_path;
  if (provider == "anthropic") {
    if (ends_with(p, "/messages")) return p;
    if (ends_with(p, "/v1")) return p + "/messages";
    return p + "/v1/messages";
  }
  if (ends_with(p, "/chat/completions")) return p;
  return p + "/chat/completions";
}

}  // namespace ks
