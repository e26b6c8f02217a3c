#include "coder/rules/templates/search_space.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/templates/library.hpp"
#include "coder/rules/templates/pool.hpp"
#include "coder/rules/templates/row_cache.hpp"
#include "coder/rules/templates/row_reduce.hpp"
#include "coder/rules/templates/row_split.hpp"
#include "coder/rules/templates/scan.hpp"
#include "coder/rules/templates/split_tf32.hpp"

namespace ks::rules {

namespace {

constexpr int kMaxBlock = 1024;
// A warp per row walks at most this many elements a row (1024 a lane): longer rows
// are a block's.
constexpr int64_t kWarpRowMax = 32768;

int64_t round_up_32(int64_t n) { return std::max<int64_t>(32, (n + 31) / 32 * 32); }

// Block sizes (powers of two from 32) up to `threads`, rounded up to a warp: no wider
// than the work it walks.
std::vector<std::string> block_sizes(int64_t threads) {
  std::vector<std::string> out;
  for (int b = 32; b <= kMaxBlock; b *= 2)
    if (b <= round_up_32(threads)) out.push_back(std::to_string(b));
  return out;
}

// Powers of two from 1 to 16 for which `fits` holds (1 always).
template <class Fn>
std::vector<std::string> runs(Fn fits) {
  std::vector<std::string> out = {"1"};
  for (int u = 2; u <= 16; u *= 2)
    if (fits(u)) out.push_back(std::to_string(u));
  return out;
}

// The planning of `base` with other parameters: a template's choice for a value the
// candidate does not have is worked out on it (the context itself is not changed).
struct variant {
  lowering_params p;
  lowering_context cx;
  variant(const lowering_context& base, const lowering_params& params)
      : p(params), cx(base.g, p, base.target, base.dev) {
    cx.shapes = base.shapes;
    cx.scalar_sym = base.scalar_sym;
    cx.input_name = base.input_name;
    cx.producer = base.producer;
    cx.consumers = base.consumers;
    cx.outputs = base.outputs;
    cx.stages = base.stages;
    cx.tensor_of = base.tensor_of;
    cx.list_of = base.list_of;
    cx.same_memory = base.same_memory;
  }
  variant(const variant&) = delete;
  variant& operator=(const variant&) = delete;
};

// row_split's legal values for `rows` rows of `len` elements: those that change how
// many blocks a row takes (0, a block a row, where a device-full splits it; 1 and
// each larger count of device-fulls whose split differs from the last one's).
std::vector<std::string> row_splits(const lowering_params& p, const lowering_device& dev, int64_t rows, int64_t len) {
  auto split_at = [&](int k) {
    lowering_params q = p;
    q.row_split = k;
    return split_blocks(q, dev, rows, len);
  };
  std::vector<std::string> out;
  int64_t last = split_at(1);
  if (last > 1) out.push_back("0");
  out.push_back("1");
  for (int k = 2; k <= 16; k *= 2) {
    const int64_t s = split_at(k);
    if (s != last) out.push_back(std::to_string(k));
    last = s;
  }
  return out.size() > 1 ? out : std::vector<std::string>{};
}

int64_t product_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

void elementwise_space(const lowering_context& cx, size_t si, search_space& out) {
  const shaped& iter = cx.stages[si].as_kind<elementwise_stage>().iter;
  const int64_t n = std::max<int64_t>(1, cx.target_size(iter.sym, product_of(iter.shape)));
  const int V = cx.p.vector_width, B = cx.p.block_size;
  // A vector of w floats where a warp has w of them each.
  out.allow("vector_width", runs([&](int w) { return w <= 4 && 32 * w <= n; }));
  out.allow("block_size", block_sizes((n + V - 1) / V));
  // A block's trip of U vectors a thread within the tensor.
  out.allow("elements_per_thread", runs([&](int u) { return int64_t{V} * B * u <= n; }));
  // A cap on the grid that binds (fewer blocks than the tensor needs, each thread
  // looping), and the first that does not.
  const int64_t needed =
      (n + int64_t{V} * B * cx.p.elements_per_thread - 1) / (int64_t{V} * B * cx.p.elements_per_thread);
  std::vector<std::string> caps;
  for (int64_t cap : {int64_t{1024}, int64_t{4096}, int64_t{8192}, int64_t{65536}, int64_t{1} << 20}) {
    caps.push_back(std::to_string(cap));
    if (cap >= needed) break;
  }
  out.allow("grid_cap", caps);
  out.allow("cache_hint", {"none", "streaming", "readonly"});
}

void row_reduce_space(const lowering_context& cx, size_t si, search_space& out) {
  variant v(cx, cx.p);  // gather_parts reads the context as emit would
  auto parts = gather_parts(v.cx, si);
  if (!parts) return;
  const reduce_parts& rp = *parts;
  const reduce_layout lay = choose_reduce_layout(cx.p, rp, cx.dev);
  const int64_t len = std::max<int64_t>(1, rp.row_len), rows = std::max<int64_t>(1, rp.rows_n);
  const int B = cx.p.block_size;
  if (lay.form == reduce_layout::whole_tensor) {
    out.allow("block_size", block_sizes(len));
    out.allow("elements_per_thread", runs([&](int u) { return int64_t{B} * u <= len; }));
    return;
  }
  if (lay.form != reduce_layout::rows) {
    out.allow("block_size", block_sizes(rows * len));
    // A column read twice stays in registers between the passes (any cache but none).
    if (lay.form == reduce_layout::middle_two_pass) out.allow("row_cache", {"none", "registers", "shared", "on_chip"});
    return;
  }
  // A block a row no wider than the row; warps a block no more than the rows.
  out.allow("block_size", block_sizes(lay.warp ? 32 * rows : len));
  std::vector<std::string> mappings = {"block"};
  if (len <= kWarpRowMax && !lay.split && !rp.r.batch_stats) mappings.push_back("warp");
  // A mapping that gives the same layout is no move (short rows are a warp's whatever
  // the mapping: row_reduce.hpp).
  if (!lay.split) {
    lowering_params other = cx.p;
    other.row_mapping =
        cx.p.row_mapping == param::row_mapping::warp ? param::row_mapping::block : param::row_mapping::warp;
    if (choose_reduce_layout(other, rp, cx.dev).warp == lay.warp) mappings = {param::name_of(cx.p.row_mapping)};
  }
  out.allow("row_mapping", mappings);
  if (!rp.r.batch_stats) out.allow("row_split", row_splits(cx.p, cx.dev, rows, len));
  if (!lay.split) {
    // The caches that hold something of a row read twice (where two give one layout,
    // as "shared" and "registers" with a warp a row, the coder finds the second
    // changes nothing, and a line that reviewed one skips the other).
    std::vector<std::string> caches;
    for (param::row_cache c : {param::row_cache::registers, param::row_cache::shared, param::row_cache::on_chip}) {
      lowering_params q = cx.p;
      q.row_cache = c;
      if (choose_row_cache(q, cx.dev, rp, lay.warp, lay.lanes).kind != row_cache_layout::none)
        caches.push_back(param::name_of(c));
    }
    if (!caches.empty()) {
      caches.push_back("none");
      out.allow("row_cache", caches);
    }
    if (rp.r.acc == acc_kind::moments) out.allow("moments", {"shifted", "welford"});
  }
  // float4 rows where nothing is computed on the loads and nothing is cached.
  if (!rp.pro && lay.cache.kind == row_cache_layout::none && len >= 4 * 32) out.allow("vector_width", {"1", "4"});
  // Loads in flight a thread on the prologue's strided pass.
  if (rp.pro && !lay.vec_rows && lay.cache.kind == row_cache_layout::none && !lay.split)
    out.allow("elements_per_thread", runs([&](int u) { return int64_t{lay.warp ? lay.lanes : B} * u <= len; }));
}

void scan_space(const lowering_context& cx, size_t si, search_space& out) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const scan_stage& st = cx.stages[si].as_kind<scan_stage>();
  auto lay = choose_scan_layout(cx, si);
  if (!lay) return;
  const shaped& in = cx.shapes.at(st.scan_in.empty() ? n.inputs[0] : st.scan_in);
  const int64_t total = std::max<int64_t>(1, cx.target_size(in.sym, product_of(in.shape)));
  if (!lay->last) {
    out.allow("block_size", block_sizes(total));  // a thread a position
    return;
  }
  const int64_t len = std::max<int64_t>(1, cx.target_size({in.sym.back()}, in.shape.back()));
  const int64_t rows = std::max<int64_t>(1, total / len);
  out.allow("block_size", block_sizes(lay->block_rows ? len : 32 * rows));
  out.allow("row_split", row_splits(cx.p, cx.dev, rows, len));
}

void pool_space(const lowering_context& cx, size_t si, search_space& out) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto lay = choose_pool_layout(cx, n);
  if (!lay) return;
  // The runs of outputs a thread that the template takes as they are (windows that
  // overlap, inputs that fit the registers).
  std::vector<std::string> per_thread;
  for (int u = 1; u <= 16; u *= 2) {
    lowering_params q = cx.p;
    q.elements_per_thread = u;
    variant v(cx, q);
    auto l = choose_pool_layout(v.cx, n);
    if (l && l->per_thread == u) per_thread.push_back(std::to_string(u));
  }
  if (per_thread.size() > 1) out.allow("elements_per_thread", per_thread);
  const shaped& o = cx.shapes.at(n.outputs[0]);
  const int64_t outputs = std::max<int64_t>(1, cx.target_size(o.sym, product_of(o.shape)));
  out.allow("block_size", block_sizes((outputs + lay->per_thread - 1) / lay->per_thread));
}

void library_space(const lowering_context& cx, size_t si, search_space& out) {
  const graph_node& n = *cx.stages[si].nodes[0];
  if (!op_is(base_kind(n.kind), op_class::product)) return;  // a convolution: its layout is the graph's rewrite
  // 3xTF32 where the template would split this product at these shapes.
  lowering_params q = cx.p;
  q.gemm_precision = param::gemm_precision::split_tf32;
  variant v(cx, q);
  if (choose_split_tf32(v.cx, n, choose_library_call(v.cx, n)).apply)
    out.allow("gemm_precision", {"fp32", "split_tf32"});
}

void no_space(const lowering_context&, size_t, search_space&) {}

void global_space(const lowering_context& cx, const std::string& source, search_space& out) {
  if (source.find("KS_EXP") != std::string::npos || source.find("KS_DIV") != std::string::npos ||
      source.find("ks_ms_merge") != std::string::npos)
    out.allow("fast_math", {"0", "1"});
  bool reads_chain = false;
  for (const stage& st : cx.stages)
    reads_chain =
        reads_chain || ((st.is<reduce_stage>() || st.is<scan_stage>()) && (st.prologue() >= 0 || !cx.p.fuse_prologue));
  if (reads_chain) out.allow("fuse_prologue", {"0", "1"});
}

}  // namespace ks::rules
