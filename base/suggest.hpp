#pragma once
// "Did you mean …?" for every loader that rejects a name: config keys, task fields,
// dtypes, plan fields, kernel names, skill ids. One rule everywhere, so a user gets
// the same help whichever file they got wrong.

#include <string>
#include <string_view>
#include <vector>

namespace ks {

// Restricted Damerau-Levenshtein distance: insertions, deletions, substitutions and
// swaps of two neighbours each count one ("budgest" is one slip from "budgets").
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` within two edits (never a whole-word replacement of
// a short word), else one that `word` abbreviates or extends by a prefix of 3+ letters
// ("warning" for "warn"); empty when nothing is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ks
