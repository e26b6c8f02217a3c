#pragma once
// The text of an ATen function schema, read without LibTorch:
//   "aten::sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)
//    -> (Tensor values, Tensor indices)"
// A library step that carries its op's schema (attrs.schema) is a call through ATen's
// dispatcher of exactly that overload (docs/launch-plan.md, "Dispatcher steps"); the
// validator reads the argument names from it, the rules coder which of the op's
// arguments are tensors. Types are kept as text (`int[2]`, `Tensor?`, `ScalarType?`).

#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

struct op_schema_arg {
  std::string type;  // "Tensor", "Tensor(a)", "int[]", "Scalar", "ScalarType?", ...
  std::string name;
  bool has_default = false;
  std::string default_value;  // the text after '=', when has_default
  bool kwarg_only = false;    // after '*'

  // "Tensor(a!)" and "Tensor?" are tensors; "Tensor[]" and "Tensor?[]" are lists of them.
  bool is_tensor() const;
  bool is_tensor_list() const;
  bool is_optional() const;
};

struct op_schema {
  std::string name;      // "aten::sort"
  std::string overload;  // "stable", or "" for the default overload
  std::vector<op_schema_arg> args;
  std::vector<std::string> returns;  // return types, e.g. {"Tensor", "Tensor"}

  std::string qualified() const { return overload.empty() ? name : name + "." + overload; }
  const op_schema_arg* find(std::string_view arg_name) const;
};

// Parses `text`; errors say what is malformed.
result<op_schema> parse_op_schema(std::string_view text);

}  // namespace ks
