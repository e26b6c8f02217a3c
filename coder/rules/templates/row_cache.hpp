#pragma once
// The row cache of the row-reduce template: when a row is read a second time (a
// normalisation's second pass, or an epilogue that reads the reduced tensor again,
// as in x * rsqrt(mean(x*x)) or x - logsumexp(x)), the row stays on chip between
// the passes and pass 2 reads it there instead of memory.
//
// "registers": each thread keeps its part of the row in registers. A normalisation
// keeps the value it reduces (`rv`, after the fused prologue); an epilogue that reads
// a row tensor again keeps that tensor's raw values (`rc_P`). K values per thread and
// array: enough for the whole row at the task's size, at most 32 registers in all;
// at a larger size the row's rest is read again. Pass 1 issues all K loads before it
// computes anything (loads behind the online softmax's branches would wait one by
// one), and the arrays are indexed only by unrolled constants, so they stay in
// registers.
// "shared" (a block per row): the row's tensors are copied into dynamic shared memory
// (cp.async: every copy in flight at once, no registers held), at most kSharedRow
// floats in all (64 KiB: three blocks an SM on an H200, so one row's copies overlap
// another's math), walked as float4s where rows are 16-byte aligned. A prologue's
// value replaces the raw element there when nothing reads the raw row again; else
// pass 2 recomputes it. A longer row's rest is read twice. With a warp per row it
// means "registers".
// "on_chip": registers where the row fits them, else shared memory; a row longer than
// one block's staging space is spread over a thread-block cluster (sm_90 on, `cluster`
// blocks a row, a power of two up to 8, the portable size): each block stages its chunk
// of the row (as row_split.hpp cuts it) in its own shared memory, reduces it, and every
// block of the cluster reads the others' partial states through distributed shared
// memory and merges them in rank order (the same bits in every block), then walks its
// chunk again from shared memory. One read and one write of the row in one kernel,
// where a block per row read a row of 1.5 MiB twice (KernelBench's softmax: 4096 rows
// of 393216). The chunks stay within kSharedRow floats a block where the cluster
// holds the row so; a longer row's blocks stage more, up to what a block may opt into
// (a cluster of 8 a row then holds one block an SM); longer still, a block per row.
//
// What it promises:
// - choose_row_cache decides from the params, the row's length at the target shapes
//   and which tensors the passes read; the pass functions write what it decided;
// - whatever part of a row the cache does not hold is read from memory by the
//   row-reduce template's own loops (the `loop` the pass 1 functions hand back), so
//   every row length is right.

#include <cstdint>
#include <string>
#include <vector>

#include "coder/rules/plan/lowering_context.hpp"

namespace ks::rules {

struct reduce_parts;
struct reduce_layout;

// A row staged in shared memory holds at most this many floats (64 KiB).
constexpr int64_t kSharedRow = 16384;
// Blocks a row at most in a cluster: the portable cluster size.
constexpr int kMaxCluster = 8;

// The device helpers that staging rows in shared memory calls (dynamic shared
// memory, cp.async copies): prepended once to a source whose kernels stage rows
// (lowering_context::uses_smem).
std::string shared_row_helpers();

// What stays on chip between a row's two passes.
struct row_cache_layout {
  enum kind_t { none, registers, shared } kind = none;
  int per_thread = 0;                   // registers: K values per thread and array
  std::vector<std::string> row_params;  // tensors pass 1 reads at [i]: loaded first
  std::vector<std::string> cached;      // those pass 2 reads again at [i] (the epilogue)
  bool keep_value = false;              // registers: rv, the reduced value, for a normalisation's pass 2
  bool in_place = false;                // shared: pass 1 writes the prologue's value over the raw element
  bool store_exp = false;               // the softmax's cache holds exp(v - the thread's max)
                           // Shared: the blocks of a cluster that hold a row between them (0: a block per row).
  int cluster = 0;
  // Shared: floats staged a block in all tensors.
  int64_t staged_floats = kSharedRow;
  // Shared: floats staged per tensor (the rest of a longer row, or of a block's
  // chunk, is read twice).
  int64_t shared_cap() const { return staged_floats / static_cast<int64_t>(row_params.size()); }
};

// The device helpers of a row spread over a cluster (barriers across the cluster, a
// pointer into another block's shared memory): prepended once to a source that has
// such a kernel (lowering_context::uses_cluster). A host build of the source (the
// tests' emulator) defines KS_CLUSTER_EMULATED and its own.
std::string cluster_helpers();

// The cache for a row reduction with a second pass (none for any other), with a
// warp (`warp`, `lanes` of it a row) or a block per row.
row_cache_layout choose_row_cache(const lowering_params& p, const lowering_device& dev, const reduce_parts& rp,
                                  bool warp, int lanes = 32);

// Threads a block of a row spread over a cluster: where the blocks' shared memory
// leaves an SM fewer of them than block_size threads would fill, twice block_size (up
// to 1024): a block of 256 threads with 192 KiB of a row, one block an SM, left 8
// warps an SM to walk it twice (KernelBench's softmax: 4.61 ms in a review on the
// H200 at 256 threads, 4.29 at 512). Else block_size.
int cluster_threads(const lowering_params& p, const lowering_device& dev, const row_cache_layout& c, int64_t row_len);

// Where a pass walks a row of the cache: the row (C) for a block per row, the block's
// chunk (cn) in a cluster.
std::string cached_span(const reduce_parts& rp, const row_cache_layout& c);

// Pass 1 over the cached part of a row, and the loop header over the rest (`loop`,
// replaced).
std::string registers_pass1(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, std::string& loop);
std::string shared_pass1(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, std::string& loop);
// Pass 2: the cached part from the cache, then the rest (`loop`) from memory.
std::string registers_pass2(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                            const std::string& loop);
std::string shared_pass2(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                         const std::string& loop);

}  // namespace ks::rules
