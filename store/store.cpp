#include "store/store.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include <cerrno>
#include <shared_mutex>
#include <thread>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "store/store_impl.hpp"

#include "model/candidate_id.hpp"
#include "model/json_codec.hpp"

namespace ks {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Column families and metadata keys. Changing any of these, a key layout or a value
// schema in a way an older build would misread means a new store format and a
// migration (see `migrations` below and docs/store.md).
constexpr const char* cf_skills = "skills";
constexpr const char* cf_experience = "experience";
constexpr const char* cf_trajectories = "trajectories";
constexpr const char* cf_kernels = "kernels";
constexpr const char* cf_tasks = "tasks";

constexpr const char* meta_format_version = "meta/format_version";
constexpr const char* meta_created_unix_ms = "meta/created_unix_ms";
constexpr const char* meta_skill_library_version = "meta/skill_library_version";
constexpr const char* meta_skill_library_hash = "meta/skill_library_hash";
constexpr const char* meta_experience_seq = "meta/experience_seq";

constexpr const char* schema_trajectory_entry = "ks.trajectory_entry/1";
constexpr const char* schema_candidate = "ks.candidate/1";
constexpr const char* schema_experience_record = "ks.experience_record/1";

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Big-endian so that RocksDB's bytewise order is numeric order.
std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[i] = char(v & 0xff);
    v >>= 8;
  }
  return s;
}

uint64_t read_be64(std::string_view s) {
  uint64_t v = 0;
  for (char c : s.substr(0, 8)) v = (v << 8) | uint8_t(c);
  return v;
}

bool starts_with(const rocksdb::Slice& s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Keys embed names followed by '\0', so a name containing '\0' would make its key
// ambiguous.
status check_name(const std::string& what, const std::string& name) {
  if (name.empty()) return error{what + " is empty"};
  if (name.find('\0') != std::string::npos) return error{what + " contains a NUL byte"};
  return {};
}

std::string trajectory_key(const std::string& task, uint64_t seq) {
  std::string k = task;
  k += '\0';
  k += be64(seq);
  return k;
}

std::string experience_prefix(const std::string& method) { return method.empty() ? std::string() : method + '\0'; }

// Decodes a stored value: JSON text naming `schema`, then a T.
template <class T>
result<T> decode_value(const rocksdb::Slice& value, const char* schema, const std::string& what) {
  auto j = parse_json(std::string_view(value.data(), value.size()), what);
  if (!j) return j.error();
  if (!j->is_object()) return error{what + ": expected a JSON object"};
  auto it = j->find("schema");
  if (it == j->end() || !it->is_string() || *it != schema) {
    std::string got = it == j->end() ? "none" : it->dump();
    return error{what + ": schema is " + got + ", expected \"" + schema + "\""};
  }
  return decode_json<T>(*j, what);
}

template <class T>
std::string encode_value(const T& x, const char* schema) {
  json j = x;
  j["schema"] = schema;
  return dump_json(j);
}

std::string printable(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------

result<std::optional<std::string>> store::impl::get(rocksdb::ColumnFamilyHandle* h, const std::string& key,
                                                    const std::string& op) const {
  std::string value;
  auto s = db->Get(rocksdb::ReadOptions(), h, key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return fail(op, s);
  return std::optional<std::string>(std::move(value));
}

result<std::optional<uint64_t>> store::impl::get_meta_number(const char* key, const std::string& op) const {
  auto v = get(db->DefaultColumnFamily(), key, op);
  if (!v) return v.error();
  if (!*v) return std::optional<uint64_t>();
  auto n = parse_number<uint64_t>(**v);
  if (!n) return fail(op, std::string(key) + " holds \"" + printable(**v) + "\", not a number");
  return std::optional<uint64_t>(*n);
}

std::unique_ptr<rocksdb::Iterator> store::impl::iterate(const char* cf_name) const {
  return std::unique_ptr<rocksdb::Iterator>(db->NewIterator(rocksdb::ReadOptions(), cf(cf_name)));
}

result<uint64_t> store::impl::last_trajectory_seq(const std::string& task, const std::string& op) const {
  auto it = iterate(cf_trajectories);
  std::string prefix = task + '\0';
  it->SeekForPrev(prefix + std::string(8, '\xff'));
  if (!it->status().ok()) return fail(op, it->status());
  if (!it->Valid() || !starts_with(it->key(), prefix)) return uint64_t(0);
  if (it->key().size() != prefix.size() + 8) {
    return fail(op, "malformed trajectory key \"" + printable(it->key().ToString()) + "\"");
  }
  return read_be64(std::string_view(it->key().data() + prefix.size(), 8));
}

// ---------------------------------------------------------------------------------
// Format migrations. Each turns a store of format `from` into format from+1 by adding
// to one write batch; the runner adds the new meta/format_version to the same batch
// and writes it synced, so a migration happens entirely or not at all (a crash during
// one leaves the old format, and the next open runs it again).

namespace {

struct migration {
  uint32_t from;
  const char* summary;
  status (*apply)(store::impl& s, rocksdb::WriteBatch& batch);
};

// Format 0 → 1. Format 0 (the prototype layout) keyed trajectory entries by
// "<task>/<seq as 20 decimal digits>" and left task and seq out of the value, as the
// key held them. '/' may occur in task names ("level1/gelu"), so a scan for task
// "level1" also met the entries of "level1/gelu". Format 1 separates task and seq by a
// NUL byte (which no task name holds), stores seq big-endian, and puts task, seq and
// the schema into the value so that a value read alone says what it is.
status migrate_trajectory_keys_0_to_1(store::impl& s, rocksdb::WriteBatch& batch) {
  const std::string op = "migrate format 0 to 1";
  auto it = s.iterate(cf_trajectories);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string key = it->key().ToString();
    auto slash = key.rfind('/');
    std::string task = slash == std::string::npos ? "" : key.substr(0, slash);
    std::string digits = slash == std::string::npos ? "" : key.substr(slash + 1);
    auto seq = digits.size() == 20 ? parse_number<uint64_t>(digits) : std::nullopt;
    if (!seq || !check_name("task", task).ok()) {
      return s.fail(op, "trajectory key \"" + printable(key) +
                            "\" is not in format 0's layout <task>/<20-digit seq>; "
                            "the store was left as it was");
    }
    std::string what = "format-0 trajectory entry \"" + printable(key) + "\"";
    auto j = parse_json(it->value().ToString(), what);
    if (!j) return s.fail(op, j.message());
    if (!j->is_object()) return s.fail(op, what + ": expected a JSON object");
    (*j)["task"] = task;
    (*j)["seq"] = *seq;
    (*j)["schema"] = schema_trajectory_entry;
    if (auto e = decode_json<trajectory_entry>(*j, what); !e) return s.fail(op, e.message());
    batch.Delete(s.cf(cf_trajectories), key);
    batch.Put(s.cf(cf_trajectories), trajectory_key(task, *seq), dump_json(*j));
  }
  if (!it->status().ok()) return s.fail(op, it->status());
  return {};
}

const migration migrations[] = {
    {0, "trajectory keys <task>/<decimal seq> → <task>\\0<big-endian seq>", migrate_trajectory_keys_0_to_1},
};

status run_migrations(store::impl& s, uint32_t found) {
  for (uint32_t v = found; v < store_format_version; ++v) {
    const migration* m = nullptr;
    for (const auto& candidate : migrations) {
      if (candidate.from == v) m = &candidate;
    }
    if (!m) {
      return s.fail("open", "store format " + std::to_string(v) + " has no migration to this build's format " +
                                std::to_string(store_format_version));
    }
    rocksdb::WriteBatch batch;
    if (auto st = m->apply(s, batch); !st) return st;
    batch.Put(s.db->DefaultColumnFamily(), meta_format_version, std::to_string(v + 1));
    if (auto w = s.commit("migrate format " + std::to_string(v), batch, /*force_sync=*/true); !w) {
      return w;
    }
    spdlog::info("memory store {}: migrated store format {} to {} ({}; {} changes)", s.dir.string(), v, v + 1,
                 m->summary, batch.Count());
  }
  return {};
}

using store_detail::lock_name;
using read_lock_t = std::shared_lock<std::shared_mutex>;

// Files that are ours, not RocksDB's: a directory holding only these (and RocksDB's info
// LOG) holds no store yet.
bool ignorable_in_empty_dir(const std::string& name) {
  return name == lock_name || name == "LOG" || name.rfind("LOG.old.", 0) == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------

store::store(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
store::~store() = default;

const fs::path& store::dir() const { return impl_->dir; }
bool store::read_only() const { return impl_->options.read_only; }
int64_t store::created_unix_ms() const { return impl_->created_ms; }

bool store::out_of_space() const { return impl_->out_of_space(); }

std::string store::write_problem() const {
  if (impl_->options.read_only) return "opened read-only";
  {
    std::shared_lock g(impl_->db_mu);
    if (!impl_->db) return impl_->broken;
  }
  if (impl_->out_of_space()) return impl_->out_of_space_text();
  return "";
}

uint64_t store::acknowledged_writes() const {
  std::shared_lock g(impl_->db_mu);
  return impl_->mark ? impl_->mark->current().acked_seq : 0;
}

uint64_t store::writes_before_repair() const {
  read_lock_t g(impl_->db_mu);
  if (!impl_->db) return 0;
  auto n = impl_->get_meta_number("meta/acked_before_repair", "read meta/acked_before_repair");
  return n && *n ? **n : 0;
}

result<std::unique_ptr<store>> store::open(const fs::path& dir, const store_options& options) {
  auto im = std::make_unique<impl>();
  im->dir = dir;
  im->options = options;
  im->write_options.sync = options.sync_writes;
  const std::string where = "memory store " + dir.string();

  std::error_code ec;
  bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) {
    return error{where + ": exists and is not a directory; memory.path must name a directory"};
  }
  bool has_db = exists && fs::exists(dir / "CURRENT", ec);
  if (!has_db && exists) {
    // No CURRENT: a new directory, someone else's, or a store that lost its CURRENT.
    std::vector<std::string> ours, others;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string name = e.path().filename().string();
      if (store_detail::is_rocksdb_file_name(name) || name == store_detail::watermark_name) {
        ours.push_back(name);
      } else if (!ignorable_in_empty_dir(name)) {
        others.push_back(name);
      }
    }
    if (!ours.empty()) {
      std::sort(ours.begin(), ours.end());
      std::string list;
      for (size_t i = 0; i < ours.size() && i < 6; ++i) list += (i ? ", " : "") + ours[i];
      return error{
          store_detail::damaged_message(dir,
                                        "CURRENT (the file that names the live MANIFEST) is missing, but the store's "
                                        "files are there (" +
                                            list + (ours.size() > 6 ? ", …" : "") + ")")};
    }
    if (!others.empty() && !options.read_only && options.create_if_missing) {
      return error{where +
                   ": the directory is not empty and holds no RocksDB database, "
                   "so it is not a KernelSkill store; refusing to write into it. "
                   "Point memory.path at an empty or new directory"};
    }
  }
  if (!has_db) {
    if (options.read_only) return error{where + ": no store there to open read-only"};
    if (!options.create_if_missing) {
      return error{where + ": no store there (and create_if_missing is off)"};
    }
    fs::create_directories(dir, ec);
    if (ec) return error{where + ": cannot create the directory: " + ec.message()};
  }

  // One writer: KernelSkill's own lock (store_impl.hpp), taken before anything is looked
  // at or written, so that the damage checks never race a live writer. A killed holder
  // leaves no stale lock.
  if (!options.read_only) {
    auto lock = store_detail::take_writer_lock(dir);
    if (!lock) return lock.error();
    im->lock = *lock;
  }

  // A reader beside a running writer can catch the writer between two steps (a flush
  // written, the MANIFEST not yet): look again before calling the store damaged.
  status opened;
  for (int attempt = 0; attempt < 5; ++attempt) {
    opened = im->open_rocks(!has_db);
    if (opened || !options.read_only || !store_detail::writer_active(dir)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!opened) return error{opened.message()};
  const bool full = im->db_read_only && !options.read_only;

  auto version = im->get_meta_number(meta_format_version, "open");
  if (!version) return version.error();
  if (!*version) {
    // A database without our metadata. If it holds nothing at all and only column
    // families of ours, it is a store whose creation was interrupted before the
    // metadata was written: finish creating it. Anything else is someone else's.
    bool empty = true;
    for (auto* h : im->handles) {
      std::unique_ptr<rocksdb::Iterator> it(im->db->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      if (it->Valid()) empty = false;
    }
    const auto& known = store_detail::our_column_families();
    bool only_ours = std::all_of(im->column_families.begin(), im->column_families.end(), [&](const std::string& n) {
      return std::find(known.begin(), known.end(), n) != known.end();
    });
    if (!empty || !only_ours || options.read_only || full) {
      std::string list;
      for (const auto& n : im->column_families) list += (list.empty() ? "" : ", ") + n;
      if (empty && only_ours && full) {
        return error{where + ": an unfinished store, and the disk is too full to finish it (" +
                     im->out_of_space_text() + ")"};
      }
      return error{where + ": a RocksDB database that is not a KernelSkill store (it has no " + meta_format_version +
                   " key; column families: " + list + "). Point memory.path at an empty or new directory"};
    }
    rocksdb::WriteBatch batch;
    batch.Put(im->db->DefaultColumnFamily(), meta_format_version, std::to_string(store_format_version));
    batch.Put(im->db->DefaultColumnFamily(), meta_created_unix_ms, std::to_string(now_unix_ms()));
    if (auto w = im->commit("write the store's metadata", batch, /*force_sync=*/true); !w) {
      return error{w.message()};
    }
    version = std::optional<uint64_t>(store_format_version);
  }
  if (**version > store_format_version) {
    return error{where + " was written by a newer KernelSkill (store format " + std::to_string(**version) +
                 "; this build reads up to " + std::to_string(store_format_version) +
                 "); use a newer build or another memory.path"};
  }

  // Column families a store of an older format may lack.
  for (const auto& n : store_detail::our_column_families()) {
    if (im->by_name.count(n)) continue;
    if (options.read_only || full) {
      return error{where + ": column family '" + n + "' is missing; open the store for writing once to add it" +
                   (full ? " (the disk is too full to do it now: " + im->out_of_space_text() + ")" : "")};
    }
    rocksdb::ColumnFamilyHandle* h = nullptr;
    auto c = im->db->CreateColumnFamily(store_detail::rocks_cf_options(), n, &h);
    if (!c.ok()) return error{where + ": create column family '" + n + "': " + c.ToString()};
    im->handles.push_back(h);
    im->by_name[n] = h;
    im->column_families.push_back(n);
  }

  if (**version < store_format_version) {
    if (options.read_only || full) {
      return error{where + " is in store format " + std::to_string(**version) + " and needs a migration to format " +
                   std::to_string(store_format_version) +
                   ", which a read-only open cannot do; open it for writing once (any "
                   "kernelskill command that uses this memory.path does)" +
                   (full ? " once the disk has room (" + im->out_of_space_text() + ")" : "")};
    }
    if (auto st = run_migrations(*im, uint32_t(**version)); !st) return error{st.message()};
  }

  auto created = im->get_meta_number(meta_created_unix_ms, "open");
  if (!created) return created.error();
  im->created_ms = created->value_or(0);
  if (auto w = im->start_watermark(); !w) return error{w.message()};
  im->start_keeper();
  return std::unique_ptr<store>(new store(std::move(im)));
}

// ---- skills ---------------------------------------------------------------------
//
// Every method below holds db_mu shared while it uses RocksDB (a reopen after a full
// disk replaces the instance under the exclusive lock); writers first give a due reopen
// its chance, before taking the lock.

namespace {

using read_lock = std::shared_lock<std::shared_mutex>;

// Under db_mu.
result<skill_library_info> installed_library(const store::impl& im) {
  const std::string op = "read the installed skill library";
  auto version = im.get_meta_number(meta_skill_library_version, op);
  if (!version) return version.error();
  auto hash = im.get(im.db->DefaultColumnFamily(), meta_skill_library_hash, op);
  if (!hash) return hash.error();
  skill_library_info info;
  info.version = uint32_t(version->value_or(0));
  info.hash = hash->value_or("");
  return info;
}

// The rule shared by check and install: no version 0, no downgrade. Under db_mu.
status acceptable_library(const store::impl& im, const std::string& op, uint32_t version) {
  if (version == 0) return im.fail(op, "skill library versions start at 1");
  auto installed = installed_library(im);
  if (!installed) return error{installed.message()};
  if (installed->version > version) {
    return im.fail(op, "the store holds skill library version " + std::to_string(installed->version) +
                           ", installed by a newer KernelSkill; this build's library is "
                           "version " +
                           std::to_string(version) +
                           " and will not replace it with an older one: use a newer build "
                           "or another memory.path");
  }
  return {};
}

}  // namespace

result<skill_library_info> store::installed_skill_library() const {
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable("read the installed skill library"); !u) return error{u.message()};
  return installed_library(*impl_);
}

status store::check_skill_library(uint32_t version, const std::string& hash) const {
  const std::string op = "check skill library version " + std::to_string(version);
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return u;
  return acceptable_library(*impl_, op, version);
}

status store::install_skill_library(uint32_t version, const std::string& hash,
                                    const std::vector<std::pair<std::string, std::string>>& docs) {
  const std::string op = "install skill library version " + std::to_string(version);
  impl_->recover_space_if_due();
  std::lock_guard lock(impl_->skills_mu);
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return u;
  if (auto c = acceptable_library(*impl_, op, version); !c) return c;
  auto installed = installed_library(*impl_);
  if (!installed) return error{installed.message()};
  if (installed->version == version && installed->hash == hash) return {};
  if (auto w = impl_->writable(op); !w) return w;

  rocksdb::WriteBatch batch;
  std::set<std::string> seen;
  for (const auto& [key, text] : docs) {
    if (key.empty()) return impl_->fail(op, "a skill doc has an empty key");
    if (!seen.insert(key).second) return impl_->fail(op, "skill doc '" + key + "' is given twice");
    auto j = parse_json(text, "skill doc '" + key + "'");
    if (!j) return impl_->fail(op, j.message());
    auto schema = j->is_object() ? j->find("schema") : j->end();
    if (!j->is_object() || schema == j->end() || !schema->is_string()) {
      return impl_->fail(op, "skill doc '" + key +
                                 "' must be a JSON object with a \"schema\" string, so that a "
                                 "reader of the store knows what it is");
    }
    batch.Put(impl_->cf(cf_skills), key, dump_json(*j));
  }
  // Replace, not merge: a doc that the new library dropped must not linger.
  size_t removed = 0;
  auto it = impl_->iterate(cf_skills);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!seen.count(it->key().ToString())) {
      batch.Delete(impl_->cf(cf_skills), it->key());
      ++removed;
    }
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  batch.Put(impl_->db->DefaultColumnFamily(), meta_skill_library_version, std::to_string(version));
  batch.Put(impl_->db->DefaultColumnFamily(), meta_skill_library_hash, hash);

  if (installed->version == version) {
    spdlog::warn(
        "memory store {}: skill library version {} changed without a version bump "
        "(hash {} → {}); reinstalling it. Bump the version when editing skills/*.yaml",
        impl_->dir.string(), version, installed->hash, hash);
  }
  if (auto w = impl_->commit(op, batch); !w) return w;
  spdlog::info(
      "memory store {}: installed skill library version {} ({} docs; was version {}, "
      "{} docs removed)",
      impl_->dir.string(), version, docs.size(), installed->version, removed);
  return {};
}

result<std::optional<std::string>> store::get_skill_doc(const std::string& key) const {
  const std::string op = "get skill doc '" + key + "'";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  return impl_->get(impl_->cf(cf_skills), key, op);
}

result<std::vector<std::pair<std::string, std::string>>> store::list_skill_docs(const std::string& prefix) const {
  const std::string op = "list skill docs '" + prefix + "'";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  std::vector<std::pair<std::string, std::string>> out;
  auto it = impl_->iterate(cf_skills);
  for (it->Seek(prefix); it->Valid() && starts_with(it->key(), prefix); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return out;
}

// ---- trajectories ---------------------------------------------------------------

result<uint64_t> store::append_trajectory(const std::string& task, trajectory_entry e) {
  const std::string op = "append to the trajectory of task '" + task + "'";
  if (auto n = check_name("the task name", task); !n) return impl_->fail(op, n.message());
  impl_->recover_space_if_due();

  std::shared_ptr<impl::trajectory_lane> lane;
  {
    std::lock_guard lock(impl_->lanes_mu);
    auto& slot = impl_->lanes[task];
    if (!slot) slot = std::make_shared<impl::trajectory_lane>();
    lane = slot;
  }
  // Held across the write: the next seq is only taken once this one is stored, so a
  // failed write leaves no gap.
  std::lock_guard lock(lane->mu);
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return error{w.message()};
  if (!lane->loaded) {
    auto last = impl_->last_trajectory_seq(task, op);
    if (!last) return last.error();
    lane->last = *last;
    lane->loaded = true;
  }
  e.task = task;
  e.seq = lane->last + 1;
  if (e.unix_ms == 0) e.unix_ms = now_unix_ms();
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf(cf_trajectories), trajectory_key(task, e.seq), encode_value(e, schema_trajectory_entry));
  if (auto w = impl_->commit(op, batch); !w) return error{w.message()};
  lane->last = e.seq;
  return e.seq;
}

result<std::vector<trajectory_entry>> store::read_trajectory(const std::string& task, uint64_t from_seq) const {
  const std::string op = "read the trajectory of task '" + task + "'";
  if (auto n = check_name("the task name", task); !n) return impl_->fail(op, n.message());
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  std::vector<trajectory_entry> out;
  const std::string prefix = task + '\0';
  auto it = impl_->iterate(cf_trajectories);
  for (it->Seek(trajectory_key(task, from_seq)); it->Valid() && starts_with(it->key(), prefix); it->Next()) {
    if (it->key().size() != prefix.size() + 8) {
      return impl_->fail(op, "malformed trajectory key \"" + printable(it->key().ToString()) + "\"");
    }
    uint64_t seq = read_be64(std::string_view(it->key().data() + prefix.size(), 8));
    auto e = decode_value<trajectory_entry>(it->value(), schema_trajectory_entry, "entry " + std::to_string(seq));
    if (!e) return impl_->fail(op, e.message());
    if (e->seq != seq || e->task != task) {
      return impl_->fail(op, "entry " + std::to_string(seq) + " says it is entry " + std::to_string(e->seq) +
                                 " of task '" + e->task + "'");
    }
    out.push_back(std::move(*e));
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return out;
}

result<std::vector<std::string>> store::list_trajectory_tasks() const {
  const std::string op = "list trajectory tasks";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  std::vector<std::string> out;
  auto it = impl_->iterate(cf_trajectories);
  it->SeekToFirst();
  while (it->Valid()) {
    std::string key = it->key().ToString();
    auto nul = key.find('\0');
    if (nul == std::string::npos) {
      return impl_->fail(op, "malformed trajectory key \"" + printable(key) + "\"");
    }
    out.push_back(key.substr(0, nul));
    // Skip the rest of this task's entries: every key of the task is below task + 1.
    it->Seek(out.back() + '\x01');
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return out;
}

// ---- kernels ----------------------------------------------------------------------

result<std::string> store::put_kernel(const candidate& c) {
  candidate stored = c;
  stored.id = candidate_id(c);
  const std::string op = "put kernel " + stored.id;
  impl_->recover_space_if_due();
  std::lock_guard lock(impl_->kernels_mu);
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return error{w.message()};
  auto existing = impl_->get(impl_->cf(cf_kernels), stored.id, op);
  if (!existing) return existing.error();
  if (*existing) return stored.id;
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf(cf_kernels), stored.id, encode_value(stored, schema_candidate));
  if (auto w = impl_->commit(op, batch); !w) return error{w.message()};
  return stored.id;
}

result<candidate> store::get_kernel(const std::string& id) const {
  const std::string op = "get kernel '" + id + "'";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  auto v = impl_->get(impl_->cf(cf_kernels), id, op);
  if (!v) return v.error();
  if (!*v) return impl_->fail(op, "no kernel with that id");
  auto c = decode_value<candidate>(rocksdb::Slice(**v), schema_candidate, "value");
  if (!c) return impl_->fail(op, c.message());
  return std::move(*c);
}

// ---- tasks ------------------------------------------------------------------------

namespace {

status check_task_record(const store::impl& im, const std::string& op, const std::string& id, const json& record) {
  if (id.empty()) return im.fail(op, "the task record id is empty");
  auto schema = record.is_object() ? record.find("schema") : record.end();
  if (!record.is_object() || schema == record.end() || !schema->is_string()) {
    return im.fail(op, "a task record must be a JSON object with a \"schema\" string");
  }
  return {};
}

}  // namespace

status store::put_task_record(const std::string& id, const json& record) { return put_task_records({{id, record}}); }

status store::put_task_records(const std::vector<std::pair<std::string, json>>& records) {
  const std::string op = records.size() == 1 ? "put task record '" + records[0].first + "'"
                                             : "put " + std::to_string(records.size()) + " task records";
  if (impl_->options.read_only) return impl_->fail(op, "the store was opened read-only");
  for (const auto& [id, record] : records) {
    if (auto c = check_task_record(*impl_, op, id, record); !c) return c;
  }
  impl_->recover_space_if_due();
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return w;
  rocksdb::WriteBatch batch;
  for (const auto& [id, record] : records) batch.Put(impl_->cf(cf_tasks), id, dump_json(record));
  return impl_->commit(op, batch);
}

result<std::optional<json>> store::get_task_record(const std::string& id) const {
  const std::string op = "get task record '" + id + "'";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  auto v = impl_->get(impl_->cf(cf_tasks), id, op);
  if (!v) return v.error();
  if (!*v) return std::optional<json>();
  auto j = parse_json(**v, "value");
  if (!j) return impl_->fail(op, j.message());
  return std::optional<json>(std::move(*j));
}

result<std::vector<std::pair<std::string, json>>> store::list_task_records(const std::string& prefix,
                                                                           size_t limit) const {
  const std::string op = "list task records";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  std::vector<std::pair<std::string, json>> out;
  auto it = impl_->iterate(cf_tasks);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (limit > 0 && out.size() >= limit) break;
    std::string id = it->key().ToString();
    auto j = parse_json(it->value().ToString(), "task record '" + printable(id) + "'");
    if (!j) return impl_->fail(op, j.message());
    out.emplace_back(std::move(id), std::move(*j));
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return out;
}

status store::delete_task_record(const std::string& id) {
  const std::string op = "delete task record '" + id + "'";
  impl_->recover_space_if_due();
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return w;
  rocksdb::WriteBatch batch;
  batch.Delete(impl_->cf(cf_tasks), id);
  return impl_->commit(op, batch);
}

status store::delete_task_records(const std::string& prefix) {
  const std::string op = "delete task records '" + printable(prefix) + "*'";
  if (impl_->options.read_only) return impl_->fail(op, "the store was opened read-only");
  if (prefix.empty()) return impl_->fail(op, "the prefix is empty (that would delete every record)");
  impl_->recover_space_if_due();
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return w;
  rocksdb::WriteBatch batch;
  auto it = impl_->iterate(cf_tasks);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
    batch.Delete(impl_->cf(cf_tasks), it->key());
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return impl_->commit(op, batch);
}

// ---- experience -------------------------------------------------------------------

status store::record_experience(experience_record rec) {
  const std::string op = "record experience of method '" + rec.method + "'";
  if (impl_->options.read_only) return impl_->fail(op, "the store was opened read-only");
  if (auto n = check_name("the method name", rec.method); !n) return impl_->fail(op, n.message());
  if (rec.bottleneck_class.find('\0') != std::string::npos) {
    return impl_->fail(op, "the bottleneck class contains a NUL byte");
  }
  if (rec.unix_ms == 0) rec.unix_ms = now_unix_ms();
  impl_->recover_space_if_due();

  std::lock_guard lock(impl_->experience_mu);
  read_lock g(impl_->db_mu);
  if (auto w = impl_->writable(op); !w) return w;
  if (!impl_->experience_seq) {
    auto stored = impl_->get_meta_number(meta_experience_seq, op);
    if (!stored) return error{stored.message()};
    if (*stored) {
      impl_->experience_seq = **stored;
    } else {
      // No counter yet (a new store, or records written before it existed): continue
      // after the highest one present so that no key is reused.
      uint64_t highest = 0;
      auto it = impl_->iterate(cf_experience);
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        auto k = it->key();
        if (k.size() >= 8) highest = std::max(highest, read_be64(std::string_view(k.data() + k.size() - 8, 8)));
      }
      if (!it->status().ok()) return impl_->fail(op, it->status());
      impl_->experience_seq = highest;
    }
  }
  uint64_t next = *impl_->experience_seq + 1;
  std::string key = rec.method + '\0' + rec.bottleneck_class + '\0' + be64(next);
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf(cf_experience), key, encode_value(rec, schema_experience_record));
  batch.Put(impl_->db->DefaultColumnFamily(), meta_experience_seq, std::to_string(next));
  if (auto w = impl_->commit(op, batch); !w) return w;
  impl_->experience_seq = next;
  return {};
}

result<std::vector<experience_record>> store::read_experience(const std::string& method) const {
  const std::string op = method.empty() ? "read experience" : "read experience of method '" + method + "'";
  read_lock g(impl_->db_mu);
  if (auto u = impl_->usable(op); !u) return error{u.message()};
  std::vector<experience_record> out;
  const std::string prefix = experience_prefix(method);
  auto it = impl_->iterate(cf_experience);
  for (it->Seek(prefix); it->Valid() && starts_with(it->key(), prefix); it->Next()) {
    auto r = decode_value<experience_record>(it->value(), schema_experience_record,
                                             "record \"" + printable(it->key().ToString()) + "\"");
    if (!r) return impl_->fail(op, r.message());
    out.push_back(std::move(*r));
  }
  if (!it->status().ok()) return impl_->fail(op, it->status());
  return out;
}

result<std::vector<method_stats>> store::experience_stats(const std::string& bottleneck,
                                                          const std::optional<std::string>& template_name,
                                                          const std::string& other_than) const {
  auto records = read_experience();
  if (!records) return records.error();
  return summarize_experience(*records, bottleneck, template_name, other_than);
}

}  // namespace ks
