#pragma once
// The content address of a candidate kernel. SHA-256 itself is base/content_hash.hpp
// (shared with the compiler cache); this adds what is hashed for a candidate.
//
// A candidate's id depends only on what decides its behaviour — the CUDA source, the
// NVRTC options and the launch plan — so the same kernel reached twice (by another
// seed, another round or another task) gets the same id and is stored once.

#include <string>

#include "base/content_hash.hpp"
#include "model/candidate.hpp"

namespace ks {

// The first 16 hex digits of the SHA-256 of the canonical JSON (dump_json: sorted
// keys, no whitespace) of {"compile_options", "plan", "source"}. id, task, origin,
// parent_id and round take no part: they say where a kernel came from, not what it is.
// 64 bits: a collision becomes likely only past ~4 billion distinct kernels.
std::string candidate_id(const candidate& c);

}  // namespace ks
