#include "llm/response_cache.hpp"

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/content_hash.hpp"

namespace ks {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json fields_json(const cache_key_fields& f) {
  json messages = json::array();
  for (const auto& m : f.messages) messages.push_back({{"content", m.content}, {"role", m.role}});
  return json{{"max_tokens", f.max_tokens}, {"messages", std::move(messages)},
              {"model", f.model},           {"provider", f.provider},
              {"system", f.system},         {"temperature", f.temperature}};
}

}  // namespace

std::string cache_key_text(const cache_key_fields& fields) {
  // nlohmann's json objects keep keys sorted: dump() is canonical.
  return fields_json(fields).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string cache_key(const cache_key_fields& fields) { return sha256_hex(cache_key_text(fields)); }

status response_cache::open() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    return ks::error{"llm cache directory '" + dir_.string() +
                     "' cannot be created: " + (ec ? ec.message() : "not a directory")};
  return {};
}

fs::path response_cache::path_for(const std::string& key) const { return dir_ / key.substr(0, 2) / (key + ".json"); }

std::optional<cached_reply> response_cache::load(const cache_key_fields& fields) const {
  const std::string text = cache_key_text(fields);
  const fs::path path = path_for(sha256_hex(text));
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    const json doc = json::parse(buf.str());
    // The stored request must be this one: guards against a file copied or edited by hand.
    if (doc.at("request").dump(-1, ' ', false, json::error_handler_t::replace) != text) return std::nullopt;
    const json& r = doc.at("response");
    cached_reply out;
    out.text = r.at("text").get<std::string>();
    out.input_tokens = r.value("input_tokens", int64_t{0});
    out.output_tokens = r.value("output_tokens", int64_t{0});
    out.model = r.value("model", std::string{});
    out.finish_reason = r.value("finish_reason", std::string{});
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

status response_cache::store(const cache_key_fields& fields, const cached_reply& reply) const {
  static std::atomic<uint64_t> counter{0};
  const std::string key = cache_key(fields);
  const fs::path path = path_for(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return ks::error{"llm cache: cannot create '" + path.parent_path().string() + "': " + ec.message()};
  const json doc = {{"format", "kernelskill-llm-cache/1"},
                    {"key", key},
                    {"stored_unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()},
                    {"request", fields_json(fields)},
                    {"response",
                     {{"text", reply.text},
                      {"input_tokens", reply.input_tokens},
                      {"output_tokens", reply.output_tokens},
                      {"model", reply.model},
                      {"finish_reason", reply.finish_reason}}}};
  const fs::path tmp =
      path.parent_path() / (key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << doc.dump(1, ' ', false, json::error_handler_t::replace) << '\n';
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return ks::error{"llm cache: cannot write '" + tmp.string() + "'"};
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return ks::error{"llm cache: cannot rename into '" + path.string() + "': " + ec.message()};
  }
  return {};
}

}  // namespace ks
