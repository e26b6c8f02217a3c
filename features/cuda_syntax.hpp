#pragma once
// Just enough CUDA C++ syntax for the feature extractor: the functions of a source
// (kernels and device helpers) with their parameters and bodies, a statement tree
// (blocks, loops with their header parts and #pragma unroll, ifs, switches,
// declarations, expression statements) and an expression tree per expression.
//
// The parsers are forgiving: they never fail and always make progress, so that
// garbage, half-written kernels and unsupported C++ still yield a tree that the
// analysis can walk. Whatever is not understood becomes an `unknown` expression node or
// an expression statement, which the analysis treats conservatively.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "features/cuda_lexer.hpp"

namespace ks::features {

using token_list = std::vector<token>;

struct token_range {
  size_t b = 0, e = 0;  // [b, e)
  bool empty() const { return e <= b; }
};

// ---------------------------------------------------------------------------
// Expressions.

enum class ex_kind : unsigned char {
  number,     // literal; num, is_int, ival
  ident,      // name (qualified: "wmma::mma_sync"); also threadIdx etc.
  string,     // string literal
  unary,      // op kids[0]: - + ! ~ * & ++ -- (prefix), sizeof
  postfix,    // op kids[0]: ++ --
  binary,     // kids[0] op kids[1]; assignments and the comma operator are binary too
  ternary,    // kids[0] ? kids[1] : kids[2]
  call,       // kids[0] = callee, kids[1..] = arguments
  subscript,  // kids[0][kids[1]]
  member,     // kids[0] . op  or  kids[0] -> op (arrow = true)
  cast,       // (type) kids[0], or X_cast<type>(kids[0]); type in `type`
  init_list,  // { kids... }
  unknown,    // anything not understood
};

struct ex_node {
  ex_kind kind = ex_kind::unknown;
  std::string op;    // operator, identifier or member name
  std::string type;  // cast: target type, spaces normalised ("const float4 *")
  bool arrow = false;
  bool is_int = false;
  long long ival = 0;
  double num = 0;
  std::vector<int> kids;
  token_range toks;
  int depth = 1;  // of the subtree; trees deeper than kMaxExprDepth are cut (unknown)
};

// Expression trees are cut at this depth, and statements nest at most this deep: every
// walk over them is recursive, and garbage must not overflow the stack.
inline constexpr int kMaxExprDepth = 200;
inline constexpr int kMaxStmtDepth = 200;

struct expr_tree {
  std::vector<ex_node> nodes;
  int root = -1;
  const ex_node& at(int i) const { return nodes[static_cast<size_t>(i)]; }
};

// Parses tokens [b, e) as one expression (the comma operator included).
expr_tree parse_expression(const token_list& t, size_t b, size_t e);

// The text of a subtree, tokens joined by single spaces: a canonical name for it.
std::string node_text(const token_list& t, const expr_tree& x, int node);

// True for names that start a type: builtin types, CUDA vector types, half types,
// fixed-width integer typedefs.
bool is_type_word(const std::string& w);
// Element size in bytes and vector lanes of a type name ("float4" → 16, 4). 0 bytes
// when unknown.
struct type_shape {
  int bytes = 0;
  int lanes = 1;
  std::string scalar;  // "float", "half", "int", ...
};
type_shape shape_of_type(const std::string& base_type);
// The base type word of a normalised type text: "const float4 *" → "float4",
// "unsigned int" → "unsigned", "long long" → "long long".
std::string base_type_of(const std::string& type_text);
// Number of '*' in a type text.
int pointer_depth_of(const std::string& type_text);
bool is_vector_type(const std::string& base_type);

// ---------------------------------------------------------------------------
// Declarations.

struct declarator {
  std::string name;
  size_t name_tok = 0;
  int pointer_depth = 0;
  std::vector<token_range> dims;  // array dimensions (an empty range: `[]`)
  bool has_init = false;
  token_range init;  // without '=' or braces' outer tokens for "{...}"
  bool brace_init = false;
};

struct declaration {
  std::string type;                // normalised type words before the declarators
  std::vector<std::string> quals;  // const, volatile, static, extern, constexpr, __shared__, __constant__, ...
  std::vector<declarator> items;
  bool has_qual(const std::string& q) const;
};

// Recognises a declaration in tokens [b, e) (no trailing ';'). False for anything
// that reads as an expression.
bool parse_declaration(const token_list& t, size_t b, size_t e, declaration& out);

// ---------------------------------------------------------------------------
// Statements.

enum class st_kind : unsigned char {
  block,        // kids: statements
  expr,         // tokens [r.b, r.e) without ';'
  decl,         // tokens [r.b, r.e) without ';'
  for_loop,     // init, cond, step; kids[0] = body
  while_loop,   // cond; kids[0] = body
  do_loop,      // cond; kids[0] = body
  if_stmt,      // cond; kids[0] = then, kids[1] = else (optional)
  switch_stmt,  // cond; kids[0] = body
  jump,         // return/break/continue/goto: r holds the whole statement (return's value after the keyword)
  empty,
};

struct statement {
  st_kind kind = st_kind::empty;
  token_range r;       // the statement's own tokens (expr/decl/jump); whole extent otherwise
  token_range cond;    // if/while/do/switch/for
  token_range init;    // for
  token_range step;    // for
  std::string pragma;  // loops: "unroll", "unroll 4", ... from a preceding #pragma
  std::vector<statement> kids;
};

// ---------------------------------------------------------------------------
// Functions.

struct param_decl {
  std::string name;
  std::string type;  // normalised
  std::string base_type;
  int pointer_depth = 0;
  bool is_const_pointee = false;
};

struct function_unit {
  std::string name;
  bool is_kernel = false;  // __global__
  std::vector<param_decl> params;
  long long launch_bounds = 0;
  token_range body;                          // inside the braces
  statement tree;                            // a block
  std::vector<std::string> template_params;  // names of template parameters
};

struct parsed_source {
  lexed_source lex;
  std::vector<function_unit> functions;  // definitions only, in source order
  std::vector<declaration> file_scope;   // file-scope declarations (__shared__, __constant__, constexpr, const, ...)
};

parsed_source parse_source(std::string_view source);

}  // namespace ks::features
