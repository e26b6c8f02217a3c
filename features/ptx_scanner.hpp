#pragma once
// What the PTX of a candidate says about its memory traffic and instruction mix,
// counted per module (docs/features.md, "PTX evidence"). The scanner reads
// instructions line by line; it ignores comments, directives other than the few it
// needs (.entry, .shared, .local), and anything it does not recognise.

#include <map>
#include <string>
#include <string_view>

namespace ks::features {

struct ptx_stats {
  bool present = false;           // the text looked like PTX (had a .version or an .entry)
  int entries = 0;                // .entry (kernels)
  int global_loads = 0;           // ld.global* (including .nc)
  int global_stores = 0;          // st.global*
  int vector_global_loads = 0;    // ld.global .v2/.v4/.v8 moving >= 64 bits
  int vector_global_stores = 0;   // st.global .v2/.v4/.v8 moving >= 64 bits
  int max_vector_lanes = 1;       // widest .vN of a global load or store moving >= 64 bits
  int shared_accesses = 0;        // ld.shared / st.shared / atom.shared
  bool declares_shared = false;   // a .shared variable
  int barriers = 0;               // bar.sync / barrier.sync / bar.red
  int shuffles = 0;               // shfl.sync
  int atomics = 0;                // atom.* and red.*
  int tensor_ops = 0;             // mma.sync / wmma.* / wgmma.*
  int approx_math = 0;            // sin/cos/lg2/div/sqrt/rsqrt/tanh .approx, div.full
  int transcendental_ops = 0;     // ex2/lg2/sin/cos/tanh/sqrt/rsqrt/rcp
  int local_accesses = 0;         // ld.local / st.local
  long long max_local_depot = 0;  // largest __local_depot array (bytes) of one kernel
};

ptx_stats scan_ptx(std::string_view ptx);

}  // namespace ks::features
