#ifndef KS_GPU_DISPATCH_RUNTIME_HPP
#define KS_GPU_DISPATCH_RUNTIME_HPP
// Calling any ATen op by its schema through c10's dispatcher: a plan's library step that
// carries attrs.schema ("Dispatcher steps" in docs/launch-plan.md). Two programs run
// such steps with this code: the reviewer (gpu/library_ops.cpp) and the launcher of an
// exported module (export/ embeds this file's text in the module it writes), so a
// module runs the op as its review did.
//
// What it promises:
// - the operator is the schema's overload; where this LibTorch lacks it, an overload of
//   the same name that has an argument for every attribute (an older or newer LibTorch
//   may name its overloads differently);
// - the stack is built argument by argument, in the schema's order:
//   - a tensor list takes the next N positional tensors, N from its attribute ("N
//     tensors", or "None" when the list is optional);
//   - an argument with an attribute of its name reads the attribute by its type: int,
//     float, bool, a number (int first), str, lists of int/float/bool ("[1, 2]", "(1,
//     2)" or one value), "None" for an optional, the tensors' device for a Device (the
//     first tensor argument's; a step without one, a factory such as aten::randn, is
//     given the plan's device by its caller); a tensor never comes from an attribute
//     (only "None", when optional);
//   - a tensor takes the next positional argument (unless none is left and the schema
//     has a default);
//   - otherwise the schema's default, None for an optional, the tensors' device, or the
//     next positional number;
// - every positional argument is used, and every result is a tensor;
// - attrs.run_layout "channels_last" is no argument of the op but how the step runs
//   it: each 4-d (5-d) tensor argument passed channels-last and each 4-d (5-d) result
//   handed on as [N, H, W, C] ([N, D, H, W, C]), contiguous (a channels-last result as
//   it lies: no copy). cuDNN
//   computes a float32 convolution in NHWC; given NCHW it converts the input and the
//   result itself (coder/rules/passes/conv_layout.hpp reads the result so);
// - a step can be prepared once (prepare: the operator's stack with every attribute
//   parsed, every failure but a result's) and run many times (run: only the positional
//   arguments and the device are filled in); call is the two at once, so a prepared
//   step computes and fails exactly as an unprepared one.
// How attribute text reads and how each failure is worded is the caller's: a Policy
// (below) — the reviewer reads attributes as the plan validator does (plan/attr_parse)
// and words errors for the plan's author; the exported module raises RuntimeErrors.
//
// ATen/c10 and the standard library only; C++17; include guards rather than #pragma
// once (the text is pasted into the module's main source file).

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace ks {
namespace dispatch_runtime {

// A Policy has, const:
//   std::string trim(const std::string&);                  attribute text without blanks
//   bool parse_int(const std::string&, int64_t&);          the whole text as one value
//   bool parse_double(const std::string&, double&);
//   bool parse_bool(const std::string&, bool&);
//   std::vector<std::string> list_items(const std::string&);  "[a, b]" → {"a", "b"}
// and these, each of which throws (the builder does not go on after one):
//   bad_attribute(key, expected, text)       attrs.KEY does not read as EXPECTED ("an
//                                            integer", "a list of numbers", …)
//   not_an_attribute(key, type)              an argument of TYPE cannot be an attribute
//   missing_positional(h, name, item, given) no positional argument left for NAME (a
//                                            tensor list's ITEM, or -1); GIVEN in all
//   no_tensor_count(name)                    a tensor list without its attribute
//   bad_tensor_count(name, text)             its attribute is not "N tensors"
//   list_item_not_tensor(name, item)         a tensor list's item is a number
//   tensor_from_attribute(name)              a tensor argument given as an attribute
//   not_a_tensor(name)                       a tensor argument's positional is a number
//   missing_argument(h, argument)            nothing gives ARGUMENT
//   unused_arguments(h, given, taken)        GIVEN positional arguments, TAKEN used
//   result_not_tensor(h, k, value)           result K is not a tensor

using attrs_t = std::map<std::string, std::string>;

// The attribute that says how the step runs its op rather than naming an argument.
inline const char* run_layout_attr() { return "run_layout"; }

// One positional argument of a step: a tensor, or a number (an int or a float, as the
// plan typed it).
struct arg {
  bool is_tensor = false;
  at::Tensor tensor;
  bool is_float = false;
  int64_t int_value = 0;
  double float_value = 0;
};

// "aten::sort.stable(Tensor self, ...) -> ..." → {"aten::sort", "stable"}.
template <class Policy>
c10::OperatorName operator_name(const std::string& schema, const Policy& policy) {
  std::string head = policy.trim(schema.substr(0, schema.find('(')));
  size_t dot = head.find('.', head.find("::"));
  return {head.substr(0, dot), dot == std::string::npos ? std::string() : head.substr(dot + 1)};
}

// The operator the schema names, or an overload of the same name whose arguments
// include every attribute; none when this LibTorch has neither.
template <class Policy>
std::optional<c10::OperatorHandle> find_operator(const std::string& schema, const attrs_t& attrs,
                                                 const Policy& policy) {
  auto& d = c10::Dispatcher::singleton();
  c10::OperatorName name = operator_name(schema, policy);
  if (auto h = d.findSchema(name)) return *h;
  for (const c10::OperatorName& other : d.getAllOpNames()) {
    if (other.name != name.name) continue;
    auto h = d.findSchema(other);
    if (!h) continue;
    bool fits = true;
    for (auto& kv : attrs) {
      if (kv.first == "schema" || kv.first == run_layout_attr()) continue;
      bool found = false;
      for (const c10::Argument& a : h->schema().arguments()) found = found || a.name() == kv.first;
      fits = fits && found;
    }
    if (fits) return *h;
  }
  return std::nullopt;
}

// One entry of a prepared step's stack: a constant (an attribute's value, a schema
// default, None), a positional argument (a tensor or a number), N positional tensors
// as a tensor list, or the device of the call's tensors.
struct slot {
  enum kind_t : uint8_t { constant, positional, tensors, optional_tensors, device };
  kind_t kind = constant;
  c10::IValue value;            // constant
  size_t first = 0, count = 0;  // positional: args[first]; a list: args[first, first + count)
};

// A step prepared once (per plan, not per call): the operator and its stack, with every
// attribute already parsed; only the positional arguments and the device are filled in
// per call. It holds for calls whose arguments are of the kinds it was prepared with
// (the same count, tensors and numbers in the same places); a plan's step always is.
struct prepared_step {
  c10::OperatorHandle op;
  std::vector<slot> slots;     // one per schema argument, in the schema's order
  std::vector<uint8_t> kinds;  // per positional argument: 0 tensor, 1 int, 2 float
  bool channels_last = false;  // attrs.run_layout: 4-d and 5-d tensors channels-last, results so

  static uint8_t kind_of(const arg& a) { return a.is_tensor ? 0 : a.is_float ? 2 : 1; }
  bool fits(const std::vector<arg>& args) const {
    if (args.size() != kinds.size()) return false;
    for (size_t k = 0; k < args.size(); ++k)
      if (kind_of(args[k]) != kinds[k]) return false;
    return true;
  }
};

// Builds a prepared step's stack for `h` from a step, argument by argument. Reads the
// kinds of the positional arguments only, never their values.
template <class Policy>
struct stack_builder {
  const c10::OperatorHandle& h;
  const std::vector<arg>& args;
  const attrs_t& attrs;
  const Policy& policy;
  size_t next = 0;  // the next positional argument

  static slot constant(c10::IValue v) {
    slot s;
    s.value = std::move(v);
    return s;
  }
  static slot at_position(slot::kind_t kind, size_t first, size_t count) {
    slot s;
    s.kind = kind;
    s.first = first;
    s.count = count;
    return s;
  }

  // A list of items read by `read` (into T), or the bad_attribute failure.
  template <class T, class List, class Read>
  c10::IValue list(const std::string& key, const std::string& text, const char* expected, Read read) {
    List v;
    for (auto& item : policy.list_items(text)) {
      T x{};
      if (!read(item, x)) {
        policy.bad_attribute(key, expected, text);
        return c10::IValue();
      }
      v.push_back(x);
    }
    return v;
  }

  // An attribute's text as an argument of `type`.
  slot scalar(const c10::TypePtr& type, const std::string& key, const std::string& text) {
    const auto& p = policy;
    switch (type->kind()) {
      case c10::TypeKind::OptionalType:
        if (p.trim(text) == "None") return constant(c10::IValue());
        return scalar(type->expectRef<c10::OptionalType>().getElementType(), key, text);
      case c10::TypeKind::IntType: {
        int64_t v = 0;
        if (!p.parse_int(text, v)) p.bad_attribute(key, "an integer", text);
        return constant(v);
      }
      case c10::TypeKind::FloatType: {
        double v = 0;
        if (!p.parse_double(text, v)) p.bad_attribute(key, "a number", text);
        return constant(v);
      }
      case c10::TypeKind::BoolType: {
        bool v = false;
        if (!p.parse_bool(text, v)) p.bad_attribute(key, "True or False", text);
        return constant(v);
      }
      case c10::TypeKind::NumberType: {
        int64_t i = 0;
        double v = 0;
        if (p.parse_int(text, i)) return constant(i);
        if (!p.parse_double(text, v)) p.bad_attribute(key, "a number", text);
        return constant(v);
      }
      case c10::TypeKind::StringType:
        return constant(text);
      case c10::TypeKind::DeviceObjType:
        return at_position(slot::device, 0, 0);  // a reference's device constant means where the inputs are
      case c10::TypeKind::ListType: {
        const c10::TypePtr& e = type->expectRef<c10::ListType>().getElementType();
        if (e->kind() == c10::TypeKind::IntType)
          return constant(list<int64_t, std::vector<int64_t>>(
              key, text, "a list of integers", [&](const std::string& s, int64_t& x) { return p.parse_int(s, x); }));
        if (e->kind() == c10::TypeKind::FloatType)
          return constant(list<double, std::vector<double>>(
              key, text, "a list of numbers", [&](const std::string& s, double& x) { return p.parse_double(s, x); }));
        if (e->kind() == c10::TypeKind::BoolType)
          return constant(list<bool, c10::List<bool>>(
              key, text, "a list of True/False", [&](const std::string& s, bool& x) { return p.parse_bool(s, x); }));
        break;
      }
      default:
        break;
    }
    p.not_an_attribute(key, type);
    return constant(c10::IValue());
  }

  // The index of the next positional argument, taken.
  size_t positional(const std::string& name, int64_t item) {
    if (next >= args.size()) policy.missing_positional(h, name, item, args.size());
    return next++;
  }

  static bool is_tensor_list(const c10::TypePtr& base) {
    if (base->kind() != c10::TypeKind::ListType) return false;
    const c10::TypeKind e = base->expectRef<c10::ListType>().getElementType()->kind();
    return e != c10::TypeKind::IntType && e != c10::TypeKind::FloatType && e != c10::TypeKind::BoolType;
  }

  // A tensor list: "N tensors" takes the next N positional tensors.
  slot tensor_list(const c10::Argument& a, const c10::TypePtr& base, bool optional) {
    auto it = attrs.find(a.name());
    if (it == attrs.end()) {
      policy.no_tensor_count(a.name());
      return constant(c10::IValue());
    }
    if (optional && policy.trim(it->second) == "None") return constant(c10::IValue());
    int64_t n = 0;
    std::string t = policy.trim(it->second);
    if (!policy.parse_int(t.substr(0, t.find(' ')), n) || n < 0) {
      policy.bad_tensor_count(a.name(), it->second);
      return constant(c10::IValue());
    }
    const bool of_optional = base->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::OptionalType;
    const size_t first = next;
    for (int64_t k = 0; k < n; ++k) {
      const arg& x = args.at(positional(a.name(), k));
      if (!x.is_tensor) policy.list_item_not_tensor(a.name(), k);
    }
    return at_position(of_optional ? slot::optional_tensors : slot::tensors, first, static_cast<size_t>(n));
  }

  slot argument(const c10::Argument& a) {
    const c10::TypePtr& type = a.type();
    const bool optional = type->kind() == c10::TypeKind::OptionalType;
    const c10::TypePtr& base = optional ? type->expectRef<c10::OptionalType>().getElementType() : type;
    if (is_tensor_list(base)) return tensor_list(a, base, optional);
    auto it = attrs.find(a.name());
    if (it != attrs.end()) {
      if (base->kind() == c10::TypeKind::TensorType) {
        if (optional && policy.trim(it->second) == "None") return constant(c10::IValue());
        policy.tensor_from_attribute(a.name());
        return constant(c10::IValue());
      }
      return scalar(type, a.name(), it->second);
    }
    if (base->kind() == c10::TypeKind::TensorType) {
      if (next < args.size() || !a.default_value()) {
        const size_t k = positional(a.name(), -1);
        if (!args[k].is_tensor) policy.not_a_tensor(a.name());
        return at_position(slot::positional, k, 1);
      }
    }
    if (a.default_value()) return constant(*a.default_value());
    if (optional) return constant(c10::IValue());
    if (base->kind() == c10::TypeKind::DeviceObjType) return at_position(slot::device, 0, 0);
    if (next < args.size() && !args[next].is_tensor) return at_position(slot::positional, positional(a.name(), -1), 1);
    policy.missing_argument(h, a);
    return constant(c10::IValue());
  }
};

// Prepares a step of `h` with positional arguments of the kinds of `args` (their values
// are not read) and `attrs`: every failure but result_not_tensor happens here.
template <class Policy>
prepared_step prepare(const c10::OperatorHandle& h, const std::vector<arg>& args, const attrs_t& attrs,
                      const Policy& policy) {
  stack_builder<Policy> b{h, args, attrs, policy};
  prepared_step p{h, {}, {}};
  for (const c10::Argument& a : h.schema().arguments()) p.slots.push_back(b.argument(a));
  if (b.next != args.size()) policy.unused_arguments(h, args.size(), b.next);
  for (const arg& a : args) p.kinds.push_back(prepared_step::kind_of(a));
  if (auto it = attrs.find(run_layout_attr()); it != attrs.end()) {
    if (policy.trim(it->second) != "channels_last")
      policy.bad_attribute(run_layout_attr(), "channels_last", it->second);
    p.channels_last = true;
  }
  return p;
}

// Calls a prepared step with `args` (of the kinds it was prepared with; otherwise
// std::invalid_argument); its tensor results. A Device argument is the first tensor
// argument's device, or `plan_device` (where the plan's inputs are) in a step without
// tensor arguments: a traced `torch.randn(..., device=x.device)` makes its tensor on
// the GPU the plan runs on, not on the CPU.
template <class Policy>
std::vector<at::Tensor> run(const prepared_step& p, const std::vector<arg>& args, const Policy& policy,
                            const c10::Device& plan_device) {
  if (!p.fits(args))
    throw std::invalid_argument("dispatch_runtime::run: " + p.op.schema().name() +
                                " was prepared for other positional arguments");
  c10::Device device = plan_device;
  for (auto& a : args)
    if (a.is_tensor) {
      device = a.tensor.device();
      break;
    }
  auto tensor = [&](const at::Tensor& t) {
    if (!p.channels_last || !t.defined() || (t.dim() != 4 && t.dim() != 5)) return t;
    return t.contiguous(t.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  };
  torch::jit::Stack stack;
  stack.reserve(p.slots.size());
  for (const slot& s : p.slots) {
    switch (s.kind) {
      case slot::constant:
        stack.push_back(s.value);
        break;
      case slot::positional: {
        const arg& x = args[s.first];
        if (x.is_tensor)
          stack.push_back(tensor(x.tensor));
        else if (x.is_float)
          stack.push_back(x.float_value);
        else
          stack.push_back(x.int_value);
        break;
      }
      case slot::tensors: {
        c10::List<at::Tensor> tensors;
        tensors.reserve(s.count);
        for (size_t k = 0; k < s.count; ++k) tensors.push_back(tensor(args[s.first + k].tensor));
        stack.push_back(std::move(tensors));
        break;
      }
      case slot::optional_tensors: {
        c10::List<c10::optional<at::Tensor>> maybe;
        maybe.reserve(s.count);
        for (size_t k = 0; k < s.count; ++k) maybe.push_back(tensor(args[s.first + k].tensor));
        stack.push_back(std::move(maybe));
        break;
      }
      case slot::device:
        stack.push_back(device);
        break;
    }
  }
  p.op.callBoxed(stack);
  std::vector<at::Tensor> out;
  out.reserve(stack.size());
  for (size_t k = 0; k < stack.size(); ++k) {
    if (!stack[k].isTensor()) policy.result_not_tensor(p.op, k, stack[k]);
    at::Tensor t = stack[k].toTensor();
    // contiguous(): a copy only where the op did not return channels-last.
    if (p.channels_last && t.defined() && t.dim() == 4) t = t.permute({0, 2, 3, 1}).contiguous();
    if (p.channels_last && t.defined() && t.dim() == 5) t = t.permute({0, 2, 3, 4, 1}).contiguous();
    out.push_back(t);
  }
  return out;
}

// Calls `h` with the step's positional arguments and attributes, preparing it for this
// one call; its tensor results.
template <class Policy>
std::vector<at::Tensor> call(const c10::OperatorHandle& h, const std::vector<arg>& args, const attrs_t& attrs,
                             const Policy& policy, const c10::Device& plan_device) {
  return run(prepare(h, args, attrs, policy), args, policy, plan_device);
}

}  // namespace dispatch_runtime
}  // namespace ks

#endif  // KS_GPU_DISPATCH_RUNTIME_HPP
