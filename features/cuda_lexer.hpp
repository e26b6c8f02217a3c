#pragma once
// A small CUDA C++ lexer for the feature extractor (docs/features.md).
//
// It drops comments and the contents of preprocessor lines, with two exceptions that
// carry meaning for performance: `#pragma unroll [N]` becomes a pragma token placed
// where the pragma stood, and object-like `#define NAME VALUE` macros are recorded
// (the feature extractor evaluates tile sizes and loop bounds through them). String
// and character literals become single tokens whose text is their contents, so that
// `extern "C"` and inline `asm("mma.sync ...")` can be recognised while nothing inside
// a string is ever mistaken for code. The lexer never fails: a stray character
// becomes a one-character punctuation token.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ks::features {

enum class tok_kind : unsigned char {
  ident,   // identifiers and keywords
  number,  // integer and floating literals, with their suffixes
  punct,   // operators and punctuation, longest match ("<<=", "->", "::", ...)
  string,  // a string or character literal; text is the contents without quotes
  pragma,  // "#pragma unroll [N]": text is "unroll" or "unroll N"
};

struct token {
  tok_kind kind = tok_kind::punct;
  std::string text;
  int line = 0;  // 1-based
};

struct lexed_source {
  std::vector<token> tokens;
  // Object-like macros: name → the tokens of the replacement text.
  std::map<std::string, std::vector<token>> defines;
};

lexed_source lex_cuda(std::string_view source);

// Helpers used by the parsers.
inline bool is_punct(const token& t, std::string_view p) { return t.kind == tok_kind::punct && t.text == p; }
inline bool is_ident(const token& t, std::string_view w) { return t.kind == tok_kind::ident && t.text == w; }

// Value of an integer literal ("16", "0x10", "16u", "4ULL"); false for floats and
// anything that is not a complete integer literal.
bool parse_int_literal(std::string_view text, long long& value);
// Value of a floating or integer literal ("1.0f", "1e-5", "3"); false otherwise.
bool parse_number_literal(std::string_view text, double& value);

}  // namespace ks::features
