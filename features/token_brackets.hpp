#pragma once
// Token helpers shared by the parsers of features/cuda_syntax.hpp (expressions and
// declarations in cuda_syntax.cpp, statements and file scope in cuda_statements.cpp):
// bracket matching over a token list and the words that qualify a declaration.
//
// What it promises: no helper looks at a token at or past the end it is given; a
// bracket without its partner yields that end.

#include <cstddef>
#include <set>
#include <string>

#include "features/cuda_syntax.hpp"

namespace ks::features::syntax {

// ( [ { and ) ] }.
bool opening(const token& t);
bool closing(const token& t);

// Index of the bracket closing the one at `open`, searching below `e`; e when none.
size_t match_close(const token_list& t, size_t open, size_t e);

// Index of the '>' (or '>>') closing a template argument list opened at `open` ('<');
// counts nested <> and skips bracketed groups. Returns e when there is none.
size_t match_angle(const token_list& t, size_t open, size_t e);

// The texts of tokens [b, e) joined by single spaces.
std::string join_tokens(const token_list& t, size_t b, size_t e);

// Words that qualify a declaration: const, static, __shared__, __restrict__, ...
const std::set<std::string>& decl_quals();

}  // namespace ks::features::syntax
