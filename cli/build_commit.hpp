#pragma once
// The commit the kernelskill binary was built from, for results that must say what ran
// (`kernelskill bench`'s per-problem rows): 7 hex digits, followed by "+modified" where
// the tree had uncommitted changes to tracked files at build time; empty where the
// build could not tell (a copy of the tree without git metadata). Written at every build
// by cmake/build_commit.cmake.

#include <string_view>

namespace ks::cli {

std::string_view build_commit();

}  // namespace ks::cli
