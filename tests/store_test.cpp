// Tests of store/: the JSON codec of the stored protocol structs, base64, candidate
// content ids, and the RocksDB store — trajectories, kernels, task records,
// experience, the skill library and its versioning, store format versioning and the
// format 0 → 1 migration, the single-writer lock, and a crash test that SIGKILLs a
// writer process (store_writer) mid-write and checks every acknowledged write.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <rocksdb/db.h>

#include "model/candidate_id.hpp"
#include "model/json_codec.hpp"
#include "store/store.hpp"
#include "store/store_check.hpp"
#include "tests/support/line_child.hpp"

extern char** environ;

using namespace ks;
using Catch::Matchers::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path = fs::temp_directory_path() / ("ks-store-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

std::unique_ptr<store> open_ok(const fs::path& dir, store_options o = {}) {
  auto s = store::open(dir, o);
  INFO((s ? std::string() : s.message()));
  REQUIRE(s.ok());
  return std::move(*s);
}

// ---- builders: every field set to something other than its default ---------------

distribution_spec full_distribution() { return {"uniform", 0.5, 2.5, -1.5, 3.25, 7.0, "bn.weight"}; }
tensor_spec full_tensor(const std::string& name) { return {name, {4, 1024}, "float16", full_distribution()}; }
task_spec full_task() {
  task_spec t;
  t.name = "level1/gelu";
  t.description = "GELU over a 4x1024 tensor";
  t.torchscript = "def forward(x):\n    return torch.nn.functional.gelu(x)\n";
  t.module_bytes = std::string("PK\x03\x04\x00\xff\x80 binary \n\r\x01", 18);
  t.module_path = "/tasks/gelu.pt";
  t.module_training = true;
  t.inputs = {full_tensor("x"), full_tensor("y")};
  t.input_program = "def inputs(device: Device) -> List[Tensor]:\n    return [torch.rand([2], device=device)]\n";
  t.parameters = {full_tensor("w")};
  t.tolerance = {1e-3, 2e-3};
  t.seed = 18446744073709551615ull;
  t.sizes = {{"cpu", {{"x", {2, 8}}, {"y", {2}}}}, {"small", {{"x", {1}}}}};
  t.kernelbench = {"import torch\nclass Model(torch.nn.Module):  \n\tpass\n",
                   "inner",
                   {{"x", "x", ""}, {"alpha", "", "3.14"}, {"y", "y", ""}}};
  return t;
}
plan_arg full_arg() { return {"int", "x.numel", "int64"}; }
plan_step full_step() {
  plan_step s;
  s.kind = "kernel";
  s.name = "gelu_kernel";
  s.grid = {"ceil_div(x.numel, BLOCK)", "1", "1"};
  s.block = {"BLOCK", "1", "1"};
  s.shared_mem = "BLOCK * 4";
  s.args = {{"tensor", "x", ""}, full_arg()};
  s.outputs = {"out"};
  s.attrs = {{"stream", "default"}};
  return s;
}
buffer_spec full_buffer() { return {"tmp", {"x.shape[0]", "2"}, "float64", "zeros"}; }
launch_plan full_plan() {
  launch_plan p;
  p.constants = {{"BLOCK", "256"}};
  p.scratch = {full_buffer()};
  p.outputs = {{"out", {"x.shape[0]"}, "float16", "zeros"}};
  p.steps = {full_step(),
             plan_step{"library", "aten::matmul", {}, {}, "0", {full_arg()}, {"mm"}, {{"transpose", "1"}}}};
  return p;
}
candidate full_candidate() {
  candidate c;
  c.id = "0123456789abcdef";
  c.task = "level1/gelu";
  c.source = "__global__ void gelu_kernel(const float* x, float* out, long n) {}";
  c.compile_options = {"--use_fast_math", "-lineinfo"};
  c.plan = full_plan();
  c.origin = "optimize:vectorize_loads";
  c.parent_id = "fedcba9876543210";
  c.round = 7;
  c.recipe = {{"template", "elementwise"}, {"vector_width", "4"}};
  return c;
}
review_options full_review_options() { return {9, false, false, 12.5, 40.0, "cpu", "cpu"}; }
compile_diagnostic full_diagnostic() { return {12, 7, "error", "identifier \"foo\" is undefined"}; }
kernel_resources full_resources() { return {"gelu_kernel", 32, 4096, 16, 1024}; }
timing_stats full_timing() { return {0.5, 0.55, 0.4, 0.9, 0.05, 100}; }
profile_metrics full_profile() { return {{{"dram_throughput_pct", 91.5}, {"achieved_occupancy_pct", 48.25}}, 3, 0.61}; }
review_phases full_phases() { return {0.125, 0.75, 0.5, 0.25, 0.0625, 1.5}; }
review_result full_review() {
  review_result r;
  r.request_id = 42;
  r.candidate_id = "0123456789abcdef";
  r.status = review_status::incorrect;
  r.message = "output 0 differs at [3, 17]";
  r.diagnostics = {full_diagnostic()};
  r.compile_log = "ptxas info: 32 registers";
  r.trials_run = 5;
  r.trials_passed = 4;
  r.max_abs_error = 0.25;
  r.max_rel_error = 0.125;
  r.candidate_time = full_timing();
  r.reference_time = {1.5, 1.6, 1.4, 2.0, 0.1, 50};
  r.speedup = 3.0;
  r.profile = full_profile();
  r.resources = {full_resources()};
  r.flags = {"suspicious_speedup"};
  r.device = "local/0: NVIDIA H200";
  r.phases = full_phases();
  return r;
}
code_features full_features() {
  return {"0123456789abcdef", "streaming", {{"vectorized_loads", 1.0}, {"kernels", 2.0}}};
}
method_choice full_choice() { return {"vectorize_loads", 0.75, {"R3", "R7"}, {{"dram_throughput_pct", 91.5}}}; }
method_veto full_veto() { return {"smem_tiling", "the kernel streams without reuse"}; }
optimization_plan full_opt_plan() {
  return {"0123456789abcdef", "memory_bandwidth", {full_choice()},
          {full_veto()},      "vectorize_loads",  "DRAM throughput 91.5% ≥ 80% and streaming"};
}
repair_plan full_repair() {
  return {"0123456789abcdef", "an undefined identifier", {"declare foo", "include the header"}};
}
trajectory_entry full_entry() {
  trajectory_entry e;
  e.task = "level1/gelu";
  e.seq = 12;
  e.unix_ms = 1764435600123;
  e.round = 3;
  e.kind = "review";
  e.candidate_id = "0123456789abcdef";
  e.parent_id = "fedcba9876543210";
  e.method = "vectorize_loads";
  e.status = review_status::timed_out;
  e.speedup = 1.75;
  e.summary = "timed out after 60 s";
  e.metrics = {{"dram_throughput_pct", 80.5}};
  e.phases = full_phases();
  return e;
}
experience_record full_experience() {
  experience_record r;
  r.method = "vectorize_loads";
  r.bottleneck_class = "memory_bandwidth";
  r.structure_class = "streaming";
  r.task = "level1/gelu";
  r.skill_library_version = 3;
  r.speedup_before = 1.25;
  r.speedup_after = 2.5;
  r.correct = true;
  r.metric_delta = {{"dram_throughput_pct", -4.5}};
  r.unix_ms = 1764435600123;
  r.template_name = "elementwise";
  return r;
}
method_stats full_stats() { return {"vectorize_loads", "memory_bandwidth", 5, 4, 3, 1.5, 2.5, 1.25}; }

// Encodes x, checks that every top-level field differs from a default T's (so the
// builder really set everything), then decodes both from the value and from its text.
template <class T>
void check_round_trip(const T& x) {
  json j = x;
  json d = T{};
  REQUIRE(j.is_object());
  CHECK(j.size() == d.size());
  for (auto it = d.begin(); it != d.end(); ++it) {
    INFO("field " << it.key());
    REQUIRE(j.contains(it.key()));
    CHECK(j[it.key()] != it.value());
  }
  auto back = decode_json<T>(j, "value");
  INFO((back ? std::string() : back.message()));
  REQUIRE(back.ok());
  CHECK(*back == x);
  auto parsed = parse_json(dump_json(j), "text");
  REQUIRE(parsed.ok());
  auto again = decode_json<T>(*parsed, "text");
  REQUIRE(again.ok());
  CHECK(*again == x);
}

// ---- raw RocksDB: stores as other (older, newer, foreign) programs would leave them --

using raw_writes = std::vector<std::tuple<std::string, std::string, std::string>>;  // cf, key, value

void write_raw_db(const fs::path& dir, const std::vector<std::string>& cfs, const raw_writes& writes) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> desc;
  for (const auto& n : cfs) desc.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(o, dir.string(), desc, &handles, &db);
  INFO(s.ToString());
  REQUIRE(s.ok());
  for (const auto& [cf, key, value] : writes) {
    size_t i = std::find(cfs.begin(), cfs.end(), cf) - cfs.begin();
    REQUIRE(i < cfs.size());
    REQUIRE(db->Put(rocksdb::WriteOptions(), handles[i], key, value).ok());
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
}

// Every key of one column family (read with RocksDB directly).
std::map<std::string, std::string> read_raw_cf(const fs::path& dir, const std::string& cf) {
  std::vector<std::string> names;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> desc;
  for (const auto& n : names) desc.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  REQUIRE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.string(), desc, &handles, &db).ok());
  std::map<std::string, std::string> out;
  size_t i = std::find(names.begin(), names.end(), cf) - names.begin();
  REQUIRE(i < names.size());
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[i]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) out[it->key().ToString()] = it->value().ToString();
  it.reset();
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
  return out;
}

const std::vector<std::string> all_cfs = {"default", "skills", "experience", "trajectories", "kernels", "tasks"};

// ---- child processes ---------------------------------------------------------------

using child_process = ks::testing::line_child;

const std::string store_writer = KS_BINARY_DIR "/bin/store_writer";

}  // namespace

// =====================================================================================
// JSON codec

TEST_CASE("every stored protocol struct survives a JSON round trip", "[codec]") {
  check_round_trip(full_distribution());
  check_round_trip(full_tensor("x"));
  check_round_trip(tolerance_spec{1e-3, 2e-3});
  check_round_trip(full_task());
  check_round_trip(full_arg());
  check_round_trip(full_step());
  check_round_trip(full_buffer());
  check_round_trip(full_plan());
  check_round_trip(full_candidate());
  check_round_trip(full_review_options());
  check_round_trip(full_diagnostic());
  check_round_trip(full_resources());
  check_round_trip(full_timing());
  check_round_trip(full_profile());
  check_round_trip(full_phases());
  check_round_trip(full_review());
  check_round_trip(full_features());
  check_round_trip(full_choice());
  check_round_trip(full_veto());
  check_round_trip(full_opt_plan());
  check_round_trip(full_repair());
  check_round_trip(full_entry());
  check_round_trip(full_experience());
  check_round_trip(full_stats());
}

TEST_CASE("the JSON form is readable: status names, base64 module, non-finite doubles", "[codec]") {
  json e = full_entry();
  CHECK(e["status"] == "timed_out");
  json r = full_review();
  CHECK(r["status"] == "incorrect");
  json t = full_task();
  CHECK(t["module_bytes"] == base64_encode(full_task().module_bytes));

  trajectory_entry odd = full_entry();
  odd.speedup = std::numeric_limits<double>::quiet_NaN();
  odd.metrics = {{"up", std::numeric_limits<double>::infinity()}, {"down", -std::numeric_limits<double>::infinity()}};
  json j = odd;
  CHECK(j["speedup"] == "NaN");
  CHECK(j["metrics"]["up"] == "Infinity");
  CHECK(j["metrics"]["down"] == "-Infinity");
  auto back = decode_json<trajectory_entry>(*parse_json(dump_json(j), "t"), "t");
  REQUIRE(back.ok());
  CHECK(std::isnan(back->speedup));
  CHECK(back->metrics["up"] == std::numeric_limits<double>::infinity());
  CHECK(back->metrics["down"] == -std::numeric_limits<double>::infinity());

  // The extreme finite values come back exactly.
  trajectory_entry edge = full_entry();
  edge.metrics = {{"fmax", 3.4028234663852886e38},
                  {"fmin", 1.1754943508222875e-38},
                  {"denorm", 1.401298464324817e-45},
                  {"dmax", std::numeric_limits<double>::max()},
                  {"dlow", std::numeric_limits<double>::lowest()}};
  auto edge_back = decode_json<trajectory_entry>(*parse_json(dump_json(json(edge)), "t"), "t");
  REQUIRE(edge_back.ok());
  CHECK(edge_back->metrics == edge.metrics);
  CHECK(double_from_json(double_to_json(-std::numeric_limits<double>::infinity())) ==
        -std::numeric_limits<double>::infinity());
  CHECK_THROWS_AS(double_from_json(json("inf")), json_decode_error);
}

TEST_CASE("decoding errors name the field by its path", "[codec]") {
  auto message_of = [](auto r) { return r ? std::string("(decoded)") : r.message(); };

  json c = full_candidate();
  c["plan"]["steps"][1]["grid"] = json::array({"1", 5});
  CHECK(message_of(decode_json<candidate>(c, "kernel k")) ==
        "kernel k: plan.steps[1].grid[1]: expected a string, got integer");

  c = full_candidate();
  c["round"] = -1;
  CHECK_THAT(message_of(decode_json<candidate>(c, "k")), Contains("round: expected a non-negative integer, got -1"));
  c["round"] = 1.5;
  CHECK_THAT(message_of(decode_json<candidate>(c, "k")), Contains("round: expected an integer, got number"));
  c["round"] = 5000000000ull;
  CHECK_THAT(message_of(decode_json<candidate>(c, "k")), Contains("round: integer 5000000000 is out of range"));

  json e = full_entry();
  e["status"] = "great";
  CHECK_THAT(message_of(decode_json<trajectory_entry>(e, "entry")),
             Contains("status: unknown review status \"great\" (known: ok, compile_error"));
  e = full_entry();
  e["metrics"]["dram"] = "lots";
  CHECK_THAT(message_of(decode_json<trajectory_entry>(e, "entry")),
             Contains("metrics.dram: expected a number (or \"NaN\""));
  e = full_entry();
  e["metrics"] = json::array();
  CHECK_THAT(message_of(decode_json<trajectory_entry>(e, "entry")), Contains("metrics: expected an object, got array"));

  json t = full_task();
  t["module_bytes"] = "abc";
  CHECK_THAT(message_of(decode_json<task_spec>(t, "task")), Contains("task: module_bytes: base64 text of length 3"));
  t = full_task();
  t["sizes"]["cpu"]["x"][1] = "eight";
  CHECK_THAT(message_of(decode_json<task_spec>(t, "task")),
             Contains("sizes.cpu.x[1]: expected an integer, got string"));
  t = full_task();
  t["inputs"][0]["init"]["mean"] = nullptr;
  CHECK_THAT(message_of(decode_json<task_spec>(t, "task")), Contains("inputs[0].init.mean: expected a number"));

  json r = full_review();
  r["candidate_time"]["repetitions"] = true;
  CHECK_THAT(message_of(decode_json<review_result>(r, "review")),
             Contains("candidate_time.repetitions: expected an integer, got boolean"));
  CHECK_THAT(message_of(decode_json<review_result>(json::array(), "review")),
             Contains("review: expected an object, got array"));
  CHECK_THAT(message_of(parse_json("{\"a\": ", "file x")), Contains("file x: not valid JSON"));
}

TEST_CASE("missing fields keep their defaults and unknown fields are ignored", "[codec]") {
  auto e = decode_json<trajectory_entry>(json{{"kind", "note"}, {"schema", "x"}, {"future", 1}}, "e");
  REQUIRE(e.ok());
  trajectory_entry expected;
  expected.kind = "note";
  CHECK(*e == expected);
}

TEST_CASE("review status names parse back and unknown ones are rejected", "[codec]") {
  for (int i = 0; i <= 6; ++i) {
    auto s = static_cast<review_status>(i);
    auto back = parse_review_status(to_string(s));
    REQUIRE(back.ok());
    CHECK(*back == s);
  }
  CHECK_FALSE(parse_review_status("OK").ok());
}

TEST_CASE("base64 matches RFC 4648 and rejects malformed text", "[codec]") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, encoded] : vectors) {
    CHECK(base64_encode(plain) == encoded);
    auto d = base64_decode(encoded);
    REQUIRE(d.ok());
    CHECK(*d == plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  CHECK(*base64_decode(base64_encode(all)) == all);

  CHECK_THAT(base64_decode("Zm9").message(), Contains("not a multiple of 4"));
  CHECK_THAT(base64_decode("Zm9v!A==").message(), Contains("invalid base64 character '!' at position 4"));
  CHECK_FALSE(base64_decode("Z===").ok());
  CHECK_FALSE(base64_decode("Zg==Zg==").ok());
  CHECK_FALSE(base64_decode("Zm=v").ok());
}

TEST_CASE("dump_json is canonical and survives invalid UTF-8", "[codec]") {
  json a = {{"b", 1}, {"a", {{"d", 2}, {"c", 3}}}};
  CHECK(dump_json(a) == R"({"a":{"c":3,"d":2},"b":1})");
  json bad = std::string("log \xff\xfe end");
  CHECK(dump_json(bad) == "\"log \xEF\xBF\xBD\xEF\xBF\xBD end\"");
}

// =====================================================================================
// Content hashes

TEST_CASE("sha256_hex (from base/) is reachable through model/candidate_id.hpp", "[hash]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("candidate_id hashes source, options and plan, nothing else", "[hash]") {
  candidate c = full_candidate();
  std::string id = candidate_id(c);
  CHECK(id.size() == 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  // Pinned: a change in the canonical form would silently re-address every stored
  // kernel, so it has to be a deliberate store format change.
  json canonical = {{"source", c.source}, {"compile_options", c.compile_options}, {"plan", c.plan}};
  CHECK(id == sha256_hex(dump_json(canonical)).substr(0, 16));
  CHECK(id == "5c4dce36c1523d35");

  candidate provenance = c;
  provenance.id = "x";
  provenance.task = "other";
  provenance.origin = "seed:template";
  provenance.parent_id = "";
  provenance.round = 0;
  CHECK(candidate_id(provenance) == id);

  candidate s = c;
  s.source += " ";
  CHECK(candidate_id(s) != id);
  candidate o = c;
  o.compile_options.pop_back();
  CHECK(candidate_id(o) != id);
  candidate p = c;
  p.plan.steps[0].block[0] = "128";
  CHECK(candidate_id(p) != id);
}

// =====================================================================================
// Store: basics, trajectories, kernels, task records, experience

TEST_CASE("a new store is created, records its creation and reopens", "[store]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  int64_t created = 0;
  {
    auto s = open_ok(dir);
    CHECK(s->dir() == dir);
    created = s->created_unix_ms();
    CHECK(created > 1700000000000);
  }
  auto s = open_ok(dir);
  CHECK(s->created_unix_ms() == created);
  auto meta = read_raw_cf(dir, "default");
  CHECK(meta["meta/format_version"] == "1");
  CHECK(meta["meta/created_unix_ms"] == std::to_string(created));
}

TEST_CASE("trajectories number entries per task, in order, across reopens", "[store][trajectory]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  // Names that share prefixes: format 0's layout confused "level1" with "level1/gelu".
  const std::vector<std::string> tasks = {"level1", "level1/gelu", "level1/gelu2", "a b"};
  {
    auto s = open_ok(dir);
    for (int i = 1; i <= 3; ++i) {
      for (const auto& t : tasks) {
        trajectory_entry e = full_entry();
        e.task = "ignored";
        e.seq = 999;
        e.unix_ms = 0;
        e.summary = t + " #" + std::to_string(i);
        auto seq = s->append_trajectory(t, e);
        REQUIRE(seq.ok());
        CHECK(*seq == uint64_t(i));
      }
    }
  }
  auto s = open_ok(dir);
  auto listed = s->list_trajectory_tasks();
  REQUIRE(listed.ok());
  CHECK(*listed == std::vector<std::string>{"a b", "level1", "level1/gelu", "level1/gelu2"});

  REQUIRE(s->append_trajectory("level1", full_entry()).value() == 4);
  auto all = s->read_trajectory("level1");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK((*all)[i].seq == i + 1);
    CHECK((*all)[i].task == "level1");
  }
  CHECK((*all)[0].summary == "level1 #1");
  CHECK((*all)[0].unix_ms > 1700000000000);
  CHECK((*all)[3].unix_ms == full_entry().unix_ms);  // kept when given
  trajectory_entry expected = full_entry();
  expected.task = "level1";
  expected.seq = 4;
  CHECK((*all)[3] == expected);

  auto tail = s->read_trajectory("level1/gelu", 2);
  REQUIRE(tail.ok());
  REQUIRE(tail->size() == 2);
  CHECK((*tail)[0].seq == 2);
  CHECK((*tail)[0].summary == "level1/gelu #2");
  CHECK(s->read_trajectory("level1/gelu", 10)->empty());
  CHECK(s->read_trajectory("unknown")->empty());
  CHECK(s->read_trajectory("level")->empty());

  auto bad = s->append_trajectory("", full_entry());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Contains(dir.string()));
  CHECK_THAT(bad.message(), Contains("the task name is empty"));
  CHECK_FALSE(s->append_trajectory(std::string("a\0b", 3), full_entry()).ok());
}

TEST_CASE("appends to one task from many threads get dense, unique seqs", "[store][trajectory]") {
  temp_dir tmp;
  auto s = open_ok(tmp / "memory");
  constexpr int threads = 8, per_thread = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        trajectory_entry e;
        e.kind = "note";
        e.summary = std::to_string(t) + ":" + std::to_string(i);
        if (!s->append_trajectory(t % 2 ? "odd" : "shared", e).ok()) ++failures;
        if (!s->append_trajectory("shared", e).ok()) ++failures;
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(failures == 0);
  auto shared = s->read_trajectory("shared");
  REQUIRE(shared.ok());
  REQUIRE(shared->size() == size_t(threads * per_thread + threads / 2 * per_thread));
  std::multiset<std::string> summaries;
  for (size_t i = 0; i < shared->size(); ++i) {
    CHECK((*shared)[i].seq == i + 1);
    summaries.insert((*shared)[i].summary);
  }
  // Each even thread wrote each summary twice to "shared", each odd thread once.
  CHECK(summaries.count("0:0") == 2);
  CHECK(summaries.count("1:0") == 1);
  CHECK(s->read_trajectory("odd")->size() == size_t(threads / 2 * per_thread));
}

TEST_CASE("kernels are content-addressed and idempotent", "[store][kernels]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  auto s = open_ok(dir);
  candidate c = full_candidate();
  auto id = s->put_kernel(c);
  REQUIRE(id.ok());
  CHECK(*id == candidate_id(c));

  candidate same_content = c;
  same_content.task = "another task";
  same_content.round = 99;
  CHECK(s->put_kernel(same_content).value() == *id);
  auto back = s->get_kernel(*id);
  REQUIRE(back.ok());
  candidate expected = c;
  expected.id = *id;
  CHECK(*back == expected);  // the first record's provenance is kept

  candidate other = c;
  other.source += "// v2";
  auto id2 = s->put_kernel(other);
  REQUIRE(id2.ok());
  CHECK(*id2 != *id);
  CHECK(s->get_kernel(*id2)->source == other.source);

  auto missing = s->get_kernel("0000000000000000");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Contains(dir.string()));
  CHECK_THAT(missing.message(), Contains("get kernel '0000000000000000': no kernel with that id"));

  s.reset();
  auto raw = read_raw_cf(dir, "kernels");
  REQUIRE(raw.count(*id));
  auto stored = json::parse(raw[*id]);
  CHECK(stored["schema"] == "ks.candidate/1");
  CHECK(stored["id"] == *id);
}

TEST_CASE("task records are stored, listed, replaced and deleted", "[store][tasks]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  {
    auto s = open_ok(dir);
    json a = {{"schema", "ks.task_record/1"}, {"state", "queued"}, {"priority", 2}};
    json b = {{"schema", "ks.task_record/1"}, {"state", "running"}};
    REQUIRE(s->put_task_record("t-b", b).ok());
    REQUIRE(s->put_task_record("t-a", a).ok());
    a["state"] = "done";
    REQUIRE(s->put_task_record("t-a", a).ok());
    auto no_schema = s->put_task_record("t-c", json{{"state", "x"}});
    REQUIRE_FALSE(no_schema.ok());
    CHECK_THAT(no_schema.message(), Contains("\"schema\""));
    CHECK_FALSE(s->put_task_record("", a).ok());
  }
  auto s = open_ok(dir);
  auto a = s->get_task_record("t-a");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK((**a)["state"] == "done");
  CHECK_FALSE(s->get_task_record("t-c")->has_value());
  auto all = s->list_task_records();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].first == "t-a");
  CHECK((*all)[1].first == "t-b");
  CHECK((*all)[1].second["state"] == "running");
  REQUIRE(s->delete_task_record("t-a").ok());
  REQUIRE(s->delete_task_record("never-there").ok());
  CHECK(s->list_task_records()->size() == 1);
  CHECK_FALSE(s->get_task_record("t-a")->has_value());
}

TEST_CASE("task records list and delete by prefix", "[store][tasks]") {
  temp_dir tmp;
  auto s = open_ok(tmp / "db");
  json r{{"schema", "test/1"}};
  for (auto id :
       {"checkpoint/a/line/0", "checkpoint/a/line/1", "checkpoint/a/seeds", "checkpoint/ab/seeds", "task/a", "task/b"})
    REQUIRE(s->put_task_record(id, r).ok());
  auto a = s->list_task_records("checkpoint/a/");
  REQUIRE(a.ok());
  REQUIRE(a->size() == 3);
  CHECK((*a)[2].first == "checkpoint/a/seeds");
  CHECK(s->list_task_records("task/", 1)->size() == 1);
  CHECK(s->list_task_records("nothing/")->empty());
  CHECK(s->list_task_records()->size() == 6);
  REQUIRE(s->delete_task_records("checkpoint/a/").ok());
  auto left = s->list_task_records();
  REQUIRE(left->size() == 3);
  CHECK((*left)[0].first == "checkpoint/ab/seeds");
  CHECK_FALSE(s->delete_task_records("").ok());
}

TEST_CASE("several task records are written in one atomic batch", "[store][tasks]") {
  temp_dir tmp;
  auto s = open_ok(tmp / "db");
  json r{{"schema", "test/1"}};
  REQUIRE(s->put_task_records({{"counter/x", r}, {"spec/x-1", r}, {"task/x-1", r}}).ok());
  CHECK(s->list_task_records()->size() == 3);
  // One bad record refuses the whole batch: nothing of it is stored.
  auto bad = s->put_task_records({{"spec/x-2", r}, {"task/x-2", json{{"state", "queued"}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Contains("put 2 task records"));
  CHECK_FALSE(s->get_task_record("spec/x-2")->has_value());
  CHECK(s->list_task_records()->size() == 3);
}

TEST_CASE("experience summarises gains per method and bottleneck", "[store][experience]") {
  auto rec = [](std::string method, std::string bottleneck, double before, double after, bool correct) {
    experience_record r = full_experience();
    r.method = std::move(method);
    r.bottleneck_class = std::move(bottleneck);
    r.speedup_before = before;
    r.speedup_after = after;
    r.correct = correct;
    return r;
  };
  std::vector<experience_record> records = {
      rec("vectorize", "memory", 1.0, 2.0, true),    // ×2
      rec("vectorize", "memory", 1.0, 8.0, true),    // ×8
      rec("vectorize", "memory", 2.0, 1.0, true),    // ×0.5, correct but slower
      rec("vectorize", "memory", 1.0, 50.0, false),  // wrong: counts as applied only
      rec("vectorize", "compute", 1.0, 3.0, true),  rec("tiling", "memory", 0.0, 0.0, true),  // no speedups: no ratio
  };
  auto stats = summarize_experience(records);
  REQUIRE(stats.size() == 3);
  CHECK(stats[0].method == "tiling");
  CHECK(stats[0].applied == 1);
  CHECK(stats[0].correct == 1);
  CHECK(stats[0].improved == 0);
  CHECK(stats[0].mean_gain == 0);
  CHECK(stats[1].method == "vectorize");
  CHECK(stats[1].bottleneck_class == "compute");
  CHECK(stats[2].bottleneck_class == "memory");
  CHECK(stats[2].applied == 4);
  CHECK(stats[2].correct == 3);
  CHECK(stats[2].improved == 2);
  CHECK(stats[2].mean_gain == Approx(2.0));  // (2 · 8 · 0.5)^(1/3)
  CHECK(stats[2].best_gain == Approx(8.0));
  // What each application gave its line: 2, 8, and 1 for the slower and the wrong one.
  CHECK(stats[2].realized_gain == Approx(std::pow(2.0 * 8.0, 0.25)));
  CHECK(stats[0].realized_gain == 1.0);  // no speedups: nothing gained
  auto memory_only = summarize_experience(records, "memory");
  REQUIRE(memory_only.size() == 2);
  CHECK(memory_only[1] == stats[2]);
  // By template: a record of another template is left out, one without a template is
  // every template's; and a task's own records can be left out.
  {
    auto by_template = records;
    by_template[0].template_name = "row_reduce";  // the ×2
    by_template[1].template_name = "";            // the ×8: older, no template
    auto elementwise = summarize_experience(by_template, "memory", std::string("elementwise"));
    REQUIRE(elementwise.size() == 2);
    CHECK(elementwise[1].applied == 3);
    CHECK(elementwise[1].best_gain == Approx(8.0));
    CHECK(summarize_experience(by_template, "memory")[1].applied == 4);  // no filter
    by_template[2].task = "mine";
    by_template[3].task = "mine";
    auto others = summarize_experience(by_template, "memory", std::nullopt, "mine");
    REQUIRE(others.size() == 2);
    CHECK(others[1].applied == 2);
  }

  temp_dir tmp;
  auto dir = tmp / "memory";
  {
    auto s = open_ok(dir);
    for (size_t i = 0; i < 4; ++i) REQUIRE(s->record_experience(records[i]).ok());
  }
  {
    // The counter survives a reopen: nothing is overwritten.
    auto s = open_ok(dir);
    for (size_t i = 4; i < records.size(); ++i) REQUIRE(s->record_experience(records[i]).ok());
    auto bad = s->record_experience(rec("", "memory", 1, 2, true));
    REQUIRE_FALSE(bad.ok());
    CHECK_THAT(bad.message(), Contains("the method name is empty"));
  }
  auto s = open_ok(dir);
  auto all = s->read_experience();
  REQUIRE(all.ok());
  CHECK(all->size() == records.size());
  auto vec = s->read_experience("vectorize");
  REQUIRE(vec.ok());
  REQUIRE(vec->size() == 5);
  CHECK((*vec)[0].bottleneck_class == "compute");  // grouped by bottleneck, oldest first
  CHECK((*vec)[1] == records[0]);
  CHECK((*vec)[4] == records[3]);
  CHECK(s->read_experience("vector")->empty());  // a prefix of a name is not the name
  auto from_store = s->experience_stats();
  REQUIRE(from_store.ok());
  CHECK(*from_store == stats);
  CHECK(*s->experience_stats("memory") == memory_only);
}

TEST_CASE("a read-only store reads and refuses every write", "[store]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  auto writer = open_ok(dir);
  REQUIRE(writer->append_trajectory("t", full_entry()).ok());
  // Read-only opens take no lock: they work beside the writer.
  store_options ro;
  ro.read_only = true;
  auto reader = open_ok(dir, ro);
  CHECK(reader->read_only());
  CHECK(reader->read_trajectory("t")->size() == 1);
  auto w = reader->append_trajectory("t", full_entry());
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.message(), Contains("opened read-only"));
  CHECK_FALSE(reader->put_kernel(full_candidate()).ok());
  CHECK_FALSE(reader->put_task_record("x", json{{"schema", "s"}}).ok());
  CHECK_FALSE(reader->delete_task_record("x").ok());
  CHECK_FALSE(reader->record_experience(full_experience()).ok());
  CHECK_FALSE(reader->install_skill_library(1, "h", {}).ok());

  auto none = store::open(tmp / "absent", ro);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Contains("no store there to open read-only"));
}

// =====================================================================================
// Skill library versions

TEST_CASE("skill libraries install, upgrade atomically, and never downgrade", "[store][skills]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  auto doc = [](const std::string& id, int v) {
    return json{{"schema", "ks.skill_method/1"}, {"id", id}, {"v", v}}.dump();
  };
  auto s = open_ok(dir);
  CHECK(s->installed_skill_library()->version == 0);
  CHECK(s->check_skill_library(1, "h1").ok());
  CHECK_FALSE(s->check_skill_library(0, "h0").ok());

  REQUIRE(s->install_skill_library(1, "h1",
                                   {{"method/vectorize", doc("vectorize", 1)},
                                    {"method/tiling", doc("tiling", 1)},
                                    {"bottleneck/memory", doc("memory", 1)}})
              .ok());
  CHECK(*s->installed_skill_library() == skill_library_info{1, "h1"});
  auto methods = s->list_skill_docs("method/");
  REQUIRE(methods.ok());
  REQUIRE(methods->size() == 2);
  CHECK((*methods)[0].first == "method/tiling");
  CHECK(json::parse((*methods)[1].second)["id"] == "vectorize");
  CHECK(s->list_skill_docs()->size() == 3);
  REQUIRE(s->get_skill_doc("bottleneck/memory")->has_value());
  CHECK_FALSE(s->get_skill_doc("bottleneck/compute")->has_value());
  REQUIRE(s->record_experience(full_experience()).ok());

  // Same version and hash: nothing changes (not even a doc given differently).
  REQUIRE(s->install_skill_library(1, "h1", {}).ok());
  CHECK(s->list_skill_docs()->size() == 3);

  // Same version, another hash: the YAML changed without a bump; reinstalled.
  REQUIRE(s->install_skill_library(1, "h1b", {{"method/vectorize", doc("vectorize", 2)}}).ok());
  CHECK(*s->installed_skill_library() == skill_library_info{1, "h1b"});
  CHECK(s->list_skill_docs()->size() == 1);

  // A newer version replaces every doc; experience stays.
  REQUIRE(s->install_skill_library(2, "h2", {{"method/unroll", doc("unroll", 2)}, {"method/tiling", doc("tiling", 2)}})
              .ok());
  auto all = s->list_skill_docs();
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].first == "method/tiling");
  CHECK(json::parse((*all)[0].second)["v"] == 2);
  CHECK((*all)[1].first == "method/unroll");
  CHECK(s->read_experience()->size() == 1);

  // An older build meets the newer library: refused, with a message saying why.
  auto old = s->install_skill_library(1, "h1", {{"method/vectorize", doc("vectorize", 1)}});
  REQUIRE_FALSE(old.ok());
  CHECK_THAT(old.message(), Contains("memory store " + dir.string() + ": install skill library version 1: "));
  CHECK_THAT(old.message(), Contains("holds skill library version 2, installed by a newer KernelSkill"));
  CHECK_THAT(old.message(), Contains("use a newer build or another memory.path"));
  CHECK_FALSE(s->check_skill_library(1, "h1").ok());
  CHECK(s->check_skill_library(2, "anything").ok());
  CHECK(s->list_skill_docs()->size() == 2);

  // Bad docs are refused and change nothing.
  auto not_json = s->install_skill_library(3, "h3", {{"method/x", "{oops"}});
  REQUIRE_FALSE(not_json.ok());
  CHECK_THAT(not_json.message(), Contains("skill doc 'method/x': not valid JSON"));
  auto no_schema = s->install_skill_library(3, "h3", {{"method/x", R"({"id":"x"})"}});
  REQUIRE_FALSE(no_schema.ok());
  CHECK_THAT(no_schema.message(), Contains("\"schema\""));
  auto twice = s->install_skill_library(3, "h3", {{"a", doc("a", 3)}, {"a", doc("a", 3)}});
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.message(), Contains("given twice"));
  CHECK(*s->installed_skill_library() == skill_library_info{2, "h2"});
  CHECK(s->list_skill_docs()->size() == 2);

  s.reset();
  auto again = open_ok(dir);
  CHECK(*again->installed_skill_library() == skill_library_info{2, "h2"});
}

// =====================================================================================
// Store format versions and migration

TEST_CASE("a store written by a newer KernelSkill is refused", "[store][format]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  write_raw_db(dir, all_cfs, {{"default", "meta/format_version", "2"}});
  auto s = store::open(dir);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "memory store " + dir.string() +
                           " was written by a newer KernelSkill (store format 2; this build "
                           "reads up to 1); use a newer build or another memory.path");
  store_options ro;
  ro.read_only = true;
  CHECK_FALSE(store::open(dir, ro).ok());
}

TEST_CASE("directories that are not KernelSkill stores are refused, untouched", "[store][format]") {
  temp_dir tmp;
  SECTION("a RocksDB database of someone else") {
    auto dir = tmp / "other-db";
    write_raw_db(dir, {"default", "users"}, {{"users", "alice", "1"}});
    auto s = store::open(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(),
               Contains("memory store " + dir.string() + ": a RocksDB database that is not a KernelSkill store"));
    CHECK_THAT(s.message(), Contains("column families: default, users"));
    std::vector<std::string> names;
    REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &names).ok());
    CHECK(names.size() == 2);  // ours were not added
  }
  SECTION("a RocksDB database with our column families but without our metadata") {
    auto dir = tmp / "no-meta";
    write_raw_db(dir, all_cfs, {{"trajectories", "k", "v"}});
    auto s = store::open(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Contains("not a KernelSkill store"));
  }
  SECTION("a non-empty directory without a database") {
    auto dir = tmp / "home";
    fs::create_directories(dir);
    std::ofstream(dir / "notes.txt") << "mine";
    auto s = store::open(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Contains(dir.string()));
    CHECK_THAT(s.message(), Contains("not empty and holds no RocksDB database"));
    CHECK(fs::exists(dir / "notes.txt"));
    CHECK_FALSE(fs::exists(dir / "CURRENT"));
  }
  SECTION("a file") {
    auto file = tmp / "file";
    std::ofstream(file) << "x";
    auto s = store::open(file);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Contains("is not a directory"));
  }
  SECTION("nothing there, and creating is off") {
    store_options o;
    o.create_if_missing = false;
    auto s = store::open(tmp / "absent", o);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Contains("no store there (and create_if_missing is off)"));
    CHECK_FALSE(fs::exists(tmp / "absent"));
  }
  SECTION("an empty database with our column families: an interrupted creation, finished") {
    auto dir = tmp / "interrupted";
    write_raw_db(dir, all_cfs, {});
    auto s = open_ok(dir);
    CHECK(s->created_unix_ms() > 0);
  }
  SECTION("an empty directory is fine") {
    auto dir = tmp / "empty";
    fs::create_directories(dir);
    open_ok(dir);
    CHECK(fs::exists(dir / "CURRENT"));
  }
}

namespace {

// A store as the prototype (format 0) wrote it: trajectory keys "<task>/<20-digit
// seq>", values without task, seq or schema; and no kernels column family yet.
std::string format0_key(const std::string& task, uint64_t seq) {
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(seq));
  return task + "/" + digits;
}
std::string format0_value(const std::string& summary) {
  trajectory_entry e = full_entry();
  e.summary = summary;
  json j = e;
  j.erase("task");
  j.erase("seq");
  return j.dump();
}

}  // namespace

TEST_CASE("a format 0 store is migrated to format 1 on open", "[store][format][migration]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  raw_writes writes = {{"default", "meta/format_version", "0"}, {"default", "meta/created_unix_ms", "1700000000000"}};
  for (uint64_t seq = 1; seq <= 12; ++seq) {  // 12: "…10" sorts after "…09" either way
    writes.emplace_back("trajectories", format0_key("level1/gelu", seq), format0_value("gelu " + std::to_string(seq)));
  }
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    writes.emplace_back("trajectories", format0_key("level1", seq), format0_value("level1 " + std::to_string(seq)));
  }
  write_raw_db(dir, {"default", "skills", "experience", "trajectories", "tasks"}, writes);

  store_options ro;
  ro.read_only = true;
  auto refused = store::open(dir, ro);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.message(), Contains("column family 'kernels' is missing"));

  {
    auto s = open_ok(dir);
    CHECK(s->created_unix_ms() == 1700000000000);
    auto gelu = s->read_trajectory("level1/gelu");
    REQUIRE(gelu.ok());
    REQUIRE(gelu->size() == 12);
    for (size_t i = 0; i < 12; ++i) {
      CHECK((*gelu)[i].seq == i + 1);
      CHECK((*gelu)[i].task == "level1/gelu");
      CHECK((*gelu)[i].summary == "gelu " + std::to_string(i + 1));
      CHECK((*gelu)[i].status == review_status::timed_out);
    }
    auto level1 = s->read_trajectory("level1");
    REQUIRE(level1.ok());
    CHECK(level1->size() == 2);  // no longer mixed with level1/gelu
    CHECK(s->append_trajectory("level1/gelu", full_entry()).value() == 13);
    CHECK(s->put_kernel(full_candidate()).ok());  // the kernels family was added
  }
  auto meta = read_raw_cf(dir, "default");
  CHECK(meta["meta/format_version"] == "1");
  auto raw = read_raw_cf(dir, "trajectories");
  CHECK(raw.size() == 15);
  for (const auto& [key, value] : raw) {
    INFO(key);
    CHECK(key.find('/') == key.rfind('/'));  // only the '/' inside the task name
    CHECK(key.find('\0') != std::string::npos);
    CHECK(json::parse(value)["schema"] == "ks.trajectory_entry/1");
  }
  auto again = open_ok(dir, ro);  // format 1 now: read-only works
  CHECK(again->read_trajectory("level1/gelu")->size() == 13);
}

TEST_CASE("a failed migration leaves the format 0 store as it was", "[store][format][migration]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  write_raw_db(dir, all_cfs,
               {{"default", "meta/format_version", "0"},
                {"trajectories", format0_key("t", 1), format0_value("fine")},
                {"trajectories", "t/12", format0_value("short seq")}});
  auto s = store::open(dir);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Contains("migrate format 0 to 1: trajectory key \"t/12\" is not in format 0's layout"));
  CHECK_THAT(s.message(), Contains("left as it was"));
  CHECK(read_raw_cf(dir, "default")["meta/format_version"] == "0");
  CHECK(read_raw_cf(dir, "trajectories").count(format0_key("t", 1)) == 1);

  auto dir2 = tmp / "memory2";
  write_raw_db(dir2, all_cfs,
               {{"default", "meta/format_version", "0"}, {"trajectories", format0_key("u", 1), "[1, 2]"}});
  auto bad_value = store::open(dir2);
  REQUIRE_FALSE(bad_value.ok());
  CHECK_THAT(bad_value.message(),
             Contains("format-0 trajectory entry \"u/00000000000000000001\": expected a JSON object"));
  CHECK(read_raw_cf(dir2, "default")["meta/format_version"] == "0");
}

// =====================================================================================
// One writer at a time

TEST_CASE("only one process opens a store for writing", "[store][lock]") {
  temp_dir tmp;
  auto dir = tmp / "memory";
  SECTION("this process holds it: a second open here and another process are refused") {
    auto s = open_ok(dir);
    auto again = store::open(dir);
    REQUIRE_FALSE(again.ok());
    CHECK_THAT(again.message(), Contains("memory store " + dir.string() + " is in use"));

    child_process other({store_writer, dir.string(), "--open-only"});
    auto line = other.next_line();
    REQUIRE(line.has_value());
    CHECK_THAT(*line, Contains("memory store " + dir.string() + " is in use"));
    CHECK_THAT(*line, Contains("another memory.path"));
    int st = other.wait();
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 3);
  }
  SECTION("another process holds it: this one is refused until it is gone") {
    child_process writer({store_writer, dir.string()});
    auto line = writer.next_line();
    REQUIRE(line == std::optional<std::string>("opened"));
    auto s = store::open(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Contains("memory store " + dir.string() + " is in use"));
    writer.kill_now();
    writer.wait();
    open_ok(dir);  // a killed holder leaves no stale lock behind
  }
}

// =====================================================================================
// Crash test: SIGKILL a writer mid-write, then check every acknowledged write.

namespace {

void crash_rounds(bool sync) {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  const std::string task = "crash/task";
  const uint32_t seed = sync ? 20261129u : 11292026u;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kill_after(50, 2000);
  INFO("sync_writes " << sync << ", seed " << seed);

  uint64_t stored_before = 0;  // entries in the store after the previous round
  uint64_t experiences_acked = 0;
  for (int round = 0; round < 5; ++round) {
    const int target = kill_after(rng);
    INFO("round " << round << ": kill after " << target << " acks");
    std::vector<std::string> args = {store_writer, dir.string(), "--task", task};
    if (!sync) args.push_back("--no-sync");
    child_process writer(args);

    uint64_t first_ack = 0, max_ack = 0;
    int acks = 0;
    std::vector<std::string> kernels;
    std::string other_output;
    auto take = [&](const std::string& line) {
      if (line.rfind("ack ", 0) == 0) {
        uint64_t seq = std::stoull(line.substr(4));
        if (first_ack == 0) first_ack = seq;
        CHECK(seq == (max_ack == 0 ? first_ack : max_ack + 1));
        max_ack = seq;
        ++acks;
      } else if (line.rfind("kernel ", 0) == 0) {
        kernels.push_back(line.substr(7));
      } else if (line.rfind("experience ", 0) == 0) {
        ++experiences_acked;
      } else if (line != "opened") {
        other_output += line + "\n";
      }
    };
    while (acks < target) {
      auto line = writer.next_line();
      INFO("writer output: " << other_output);
      REQUIRE(line.has_value());  // the writer must not stop by itself
      take(*line);
    }
    writer.kill_now();
    // Lines already in the pipe were acknowledged before the kill: they count too.
    while (auto line = writer.next_line()) take(*line);
    int st = writer.wait();
    CHECK(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == SIGKILL);
    CHECK(other_output.empty());

    // The writer continued where the store stood, including entries it stored but
    // could not acknowledge before the previous kill.
    CHECK(first_ack == stored_before + 1);

    auto s = open_ok(dir, store_options{true, sync, false, true});
    auto entries = s->read_trajectory(task);
    INFO((entries ? std::string() : entries.message()));
    REQUIRE(entries.ok());  // every entry decodes
    REQUIRE(entries->size() >= max_ack);
    for (size_t i = 0; i < entries->size(); ++i) {
      REQUIRE((*entries)[i].seq == i + 1);  // contiguous from 1
      CHECK((*entries)[i].task == task);
      CHECK((*entries)[i].kind == "review");
    }
    for (const auto& id : kernels) {
      auto k = s->get_kernel(id);
      INFO((k ? std::string() : k.message()));
      REQUIRE(k.ok());
      CHECK(candidate_id(*k) == id);
    }
    auto exp = s->read_experience("vectorize_loads");
    REQUIRE(exp.ok());
    CHECK(exp->size() >= experiences_acked);
    stored_before = entries->size();
  }
}

}  // namespace

TEST_CASE("the writer lock is the process's: a forked child does not keep the store locked", "[store][lock]") {
  // The daemon forks NVRTC compile children without exec; when it is killed they may run
  // on for a while. They must not keep the next daemon out.
  temp_dir tmp;
  const auto dir = tmp / "memory";
  auto s = open_ok(dir);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::sleep(3);
    ::_exit(0);
  }
  s.reset();  // the parent lets go (as a killed daemon's process does)
  auto again = store::open(dir);
  INFO((again ? std::string() : again.message()));
  CHECK(again.ok());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST_CASE("a writer killed mid-write loses nothing it acknowledged (WAL, no sync)", "[store][crash]") {
  crash_rounds(false);
}

TEST_CASE("a writer killed mid-write loses nothing it acknowledged (sync_writes)", "[store][crash]") {
  crash_rounds(true);
}

// =====================================================================================
// Damage: refused with the file named, never repaired by deleting (store_fault_test
// damages stores at random; these are the issue's cases, one by one).

namespace {

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_bytes(const fs::path& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string current_manifest_name(const fs::path& dir) {
  std::string c = file_bytes(dir / "CURRENT");
  while (!c.empty() && c.back() == '\n') c.pop_back();
  return c;
}

fs::path newest(const fs::path& dir, const std::string& ext) {
  fs::path best;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext && (best.empty() || e.path().filename() > best.filename())) best = e.path();
  return best;
}

// A store whose second life flushed the first's entries into a table (a MANIFEST edit),
// then wrote more to its write-ahead log: `n` entries in all.
void two_lives(const fs::path& dir, int n) {
  for (int life = 0; life < 2; ++life) {
    auto s = open_ok(dir);
    for (int i = 0; i < n / 2; ++i) {
      trajectory_entry e;
      e.kind = "note";
      e.summary = "entry " + std::to_string(i) + " of life " + std::to_string(life);
      REQUIRE(s->append_trajectory("t", e).ok());
    }
  }
}

std::string refusal(const fs::path& dir, store_options o = {}) {
  auto s = store::open(dir, o);
  REQUIRE_FALSE(s.ok());
  return s.message();
}

}  // namespace

TEST_CASE("a MANIFEST cut by 9 bytes or by half is refused, naming it, and no table is deleted", "[store][damage]") {
  for (bool half : {false, true}) {
    INFO((half ? "half" : "9 bytes"));
    temp_dir tmp;
    const auto dir = tmp / "memory";
    two_lives(dir, 60);
    const std::string manifest = current_manifest_name(dir);
    const auto size = fs::file_size(dir / manifest);
    fs::resize_file(dir / manifest, half ? size / 2 : size - 9);
    const auto files = names_in(dir);
    REQUIRE(std::count_if(files.begin(), files.end(),
                          [](auto& f) { return f.size() > 4 && f.substr(f.size() - 4) == ".sst"; }) > 0);
    for (bool read_only : {false, true}) {
      store_options o;
      o.read_only = read_only;
      auto msg = refusal(dir, o);
      CHECK_THAT(msg, Contains("memory store " + dir.string() + " is damaged"));
      CHECK_THAT(msg, Contains(manifest));
      CHECK_THAT(msg, Contains("Nothing was changed or deleted"));
      CHECK_THAT(msg, Contains("kernelskill store repair --memory " + dir.string()));
    }
    CHECK(names_in(dir) == files);  // every table is still there
  }
}

TEST_CASE("flipped bytes in the write-ahead log are refused, not dropped", "[store][damage]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 40);
  const auto wal = newest(dir, ".log");
  std::string b = file_bytes(wal);
  REQUIRE(b.size() > 200);
  b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x20);
  put_bytes(wal, b);
  // RocksDB finds a checksum mismatch, or (a flipped length) takes the rest for a torn
  // end; either way acknowledged writes are missing, and the log is named.
  auto msg = refusal(dir);
  CHECK_THAT(msg, Contains(wal.filename().string()));
  CHECK_THAT(msg, Contains("were acknowledged"));
  CHECK(file_bytes(wal) == b);
}

TEST_CASE("a damaged record after the last acknowledged write is dropped, with a copy in lost/", "[store][damage]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 20);
  // What a power cut in the middle of a write can leave: a whole record header whose
  // body is not what was written. Nothing after the last acknowledged write.
  const auto wal = newest(dir, ".log");
  std::string b = file_bytes(wal);
  REQUIRE(b.size() % 32768 + 7 + 20 < 32768);  // one block: a complete, wrong record
  b += std::string("\x12\x34\x56\x78\x14\x00\x01", 7) + std::string(20, 'z');
  put_bytes(wal, b);
  auto s = open_ok(dir);
  CHECK(s->read_trajectory("t")->size() == 20);
  REQUIRE(fs::exists(dir / "lost"));
  REQUIRE_FALSE(fs::is_empty(dir / "lost"));
  CHECK(file_bytes(fs::directory_iterator(dir / "lost")->path()) == b);
}

TEST_CASE("the watermark is part of the store: missing or damaged, the store is refused", "[store][damage]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 10);
  const auto mark = dir / "KERNELSKILL-WATERMARK";
  std::string good = file_bytes(mark);
  CHECK_THAT(good, Contains("acked_seq"));
  std::string bad = good;
  bad[good.find("acked_seq") + 10] = '9';
  put_bytes(mark, bad);
  CHECK_THAT(refusal(dir), Contains("KERNELSKILL-WATERMARK is damaged (its checksum does not match)"));
  fs::remove(mark);
  CHECK_THAT(refusal(dir), Contains("KERNELSKILL-WATERMARK is missing"));
  put_bytes(mark, good);
  CHECK(open_ok(dir)->read_trajectory("t")->size() == 10);
}

TEST_CASE("a store without CURRENT is called damaged, not someone else's directory", "[store][damage]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 10);
  fs::remove(dir / "CURRENT");
  auto msg = refusal(dir);
  CHECK_THAT(msg, Contains("is damaged: CURRENT (the file that names the live MANIFEST) is missing"));
  CHECK_THAT(msg, Contains("MANIFEST-"));
}

TEST_CASE("repair keeps the damaged store, salvages what can be read and lists the rest", "[store][damage][repair]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 40);
  const auto wal = newest(dir, ".log");
  std::string b = file_bytes(wal);
  b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x20);
  put_bytes(wal, b);
  REQUIRE_FALSE(store::open(dir).ok());

  auto r = repair_store(dir);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  // The damaged store is kept whole, byte for byte.
  REQUIRE(fs::exists(r->kept));
  CHECK(file_bytes(r->kept / wal.filename()) == b);
  // What could not be read is listed: the dropped log bytes and the acknowledged writes
  // beyond what was read.
  CHECK_FALSE(r->complete);
  std::string listed;
  for (auto& l : r->not_recovered) listed += l + "\n";
  CHECK_THAT(listed, Contains(wal.filename().string()));
  CHECK_THAT(listed, Contains("were acknowledged and are not in what could be read"));
  CHECK(r->reached < r->acked_before);
  // The repaired store opens; the first life's entries (in a table) are all there.
  {
    auto s = open_ok(dir);
    auto entries = s->read_trajectory("t");
    REQUIRE(entries.ok());
    CHECK(entries->size() >= 20);
    CHECK(entries->size() < 40);
    CHECK(s->writes_before_repair() >= r->acked_before);
  }
  // check_store calls the repaired store healthy, the kept one damaged.
  auto healthy = check_store(dir);
  REQUIRE(healthy.ok());
  CHECK(healthy->healthy);
  auto damaged = check_store(r->kept);
  REQUIRE(damaged.ok());
  CHECK_FALSE(damaged->healthy);
  CHECK_THAT(damaged->verdict, Contains("is damaged"));
}

TEST_CASE("repair of a store with a cut MANIFEST rebuilds it and lists what RocksDB could not place",
          "[store][damage][repair]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 40);
  const std::string manifest = current_manifest_name(dir);
  fs::resize_file(dir / manifest, fs::file_size(dir / manifest) - 9);
  auto r = repair_store(dir);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK_FALSE(r->complete);  // a rebuilt MANIFEST is always reported
  CHECK(fs::exists(r->kept / manifest));
  auto s = open_ok(dir);
  // The tables (the first life) survive a MANIFEST rebuild.
  CHECK(s->read_trajectory("t")->size() >= 20);
}

TEST_CASE("a healthy store repairs to itself, completely", "[store][repair]") {
  temp_dir tmp;
  const auto dir = tmp / "memory";
  two_lives(dir, 20);
  auto r = repair_store(dir);
  INFO((r ? std::string() : r.message()));
  REQUIRE(r.ok());
  for (auto& l : r->not_recovered) UNSCOPED_INFO(l);
  CHECK(r->complete);
  CHECK(open_ok(dir)->read_trajectory("t")->size() == 20);
}
