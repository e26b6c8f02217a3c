#include "task/task_loader.hpp"

#include "base/strings.hpp"
#include "base/suggest.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <variant>

#include <yaml-cpp/yaml.h>

namespace ks {
namespace {

// ---------------------------------------------------------------------------
// Vocabulary.

constexpr std::array<std::string_view, 7> kDtypes = {"float32", "float16", "bfloat16", "float64",
                                                     "int32",   "int64",   "bool"};

constexpr std::array<std::string_view, 10> kInitKinds = {"normal", "uniform", "randint",         "constant", "zeros",
                                                         "ones",   "arange",  "kaiming_uniform", "module",   "program"};

constexpr std::array<std::string_view, 9> kTopKeys = {
    "name", "description", "reference", "inputs", "input_program", "parameters", "tolerance", "seed", "sizes"};
constexpr std::array<std::string_view, 4> kReferenceKeys = {"torchscript", "module", "training", "kernelbench"};
constexpr std::array<std::string_view, 3> kKernelbenchKeys = {"source", "model_attr", "arguments"};
constexpr std::array<std::string_view, 3> kArgumentKeys = {"name", "input", "value"};
constexpr std::array<std::string_view, 4> kTensorKeys = {"name", "shape", "dtype", "init"};
constexpr std::array<std::string_view, 2> kToleranceKeys = {"atol", "rtol"};
constexpr std::array<std::string_view, 7> kInitKeys = {"kind", "mean", "std", "low", "high", "value", "attr"};

// Words a tensor name may not be: it becomes a parameter of `def forward(...)`, so
// Python keywords do not parse, and `torch` would shadow the module the body calls.
const std::set<std::string, std::less<>> kReservedNames = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",    "torch"};

bool is_floating(std::string_view dtype) {
  return dtype == "float32" || dtype == "float16" || dtype == "bfloat16" || dtype == "float64";
}
bool is_integral(std::string_view dtype) { return dtype == "int32" || dtype == "int64"; }

// The distribution parameters each kind reads; the others must stay unset.
std::vector<std::string_view> init_params(std::string_view kind) {
  if (kind == "normal") return {"mean", "std"};
  if (kind == "uniform" || kind == "randint") return {"low", "high"};
  if (kind == "constant") return {"value"};
  if (kind == "module") return {"attr"};
  return {};
}

// A module attribute path: "weight", "bn.running_mean", "layers.0.bias".
bool valid_attribute_path(std::string_view s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_]+)*");
  return std::regex_match(s.begin(), s.end(), re);
}

// ---------------------------------------------------------------------------
// Text helpers.

// " (did you mean "shape"?)" for the closest candidate, else "".
template <class Range>
std::string did_you_mean(std::string_view word, const Range& candidates) {
  std::string best = closest(word, std::vector<std::string>(std::begin(candidates), std::end(candidates)));
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  if (out.size() > 60) out = out.substr(0, 57) + "...";
  return out + "\"";
}

// Shortest text that reads back as the same double.
std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

bool valid_task_name(std::string_view s) {
  static const std::regex re("[A-Za-z0-9_.-]+");
  return std::regex_match(s.begin(), s.end(), re);
}
bool valid_identifier(std::string_view s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s.begin(), s.end(), re);
}

// ---------------------------------------------------------------------------
// Key paths ("inputs[0].init.std"): how errors name a place, with or without YAML.

struct key_path {
  std::vector<std::variant<std::string, size_t>> parts;

  key_path operator/(std::string key) const {
    key_path p = *this;
    p.parts.emplace_back(std::move(key));
    return p;
  }
  key_path operator[](size_t index) const {
    key_path p = *this;
    p.parts.emplace_back(index);
    return p;
  }
  std::string str() const {
    std::string out;
    for (const auto& part : parts) {
      if (auto* key = std::get_if<std::string>(&part)) {
        if (!out.empty()) out += '.';
        out += *key;
      } else {
        out += '[' + std::to_string(std::get<size_t>(part)) + ']';
      }
    }
    return out.empty() ? "(top level)" : out;
  }
};

// A rule the task breaks: where, and what was expected.
struct problem {
  key_path where;
  std::string what;
};

// ---------------------------------------------------------------------------
// Semantic rules, shared by parse_task (which adds line numbers) and validate_task.

std::optional<problem> check_shape(const std::vector<int64_t>& shape, const key_path& at) {
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0) return problem{at[i], "expected a positive integer, got " + std::to_string(shape[i])};
    if (__builtin_mul_overflow(numel, shape[i], &numel))
      return problem{at, "too many elements in " + format_shape(shape)};
  }
  return std::nullopt;
}

std::optional<problem> check_tensor(const tensor_spec& t, const key_path& at) {
  if (!valid_identifier(t.name))
    return problem{at / "name", "expected an identifier ([A-Za-z_][A-Za-z0-9_]*), got " + quote(t.name)};
  if (kReservedNames.count(t.name))
    return problem{at / "name", quote(t.name) + " is reserved in TorchScript; choose another name"};
  if (auto p = check_shape(t.shape, at / "shape")) return p;
  if (std::find(kDtypes.begin(), kDtypes.end(), t.dtype) == kDtypes.end())
    return problem{at / "dtype",
                   "expected one of " + join(kDtypes) + ", got " + quote(t.dtype) + did_you_mean(t.dtype, kDtypes)};

  const distribution_spec& d = t.init;
  key_path init = at / "init";
  if (d.kind == "module" && !valid_attribute_path(d.attr))
    return problem{init / "attr",
                   "expected the path of a tensor attribute of the module "
                   "(e.g. bn.weight), got " +
                       quote(d.attr)};
  if (std::find(kInitKinds.begin(), kInitKinds.end(), d.kind) == kInitKinds.end())
    return problem{init / "kind",
                   "expected one of " + join(kInitKinds) + ", got " + quote(d.kind) + did_you_mean(d.kind, kInitKinds)};
  for (auto [name, v] : {std::pair{"mean", d.mean}, std::pair{"std", d.std}, std::pair{"low", d.low},
                         std::pair{"high", d.high}, std::pair{"value", d.value}}) {
    if (!std::isfinite(v)) return problem{init / name, "expected a finite number"};
  }
  // Real-valued draws would be truncated to a few integers: say so rather than make
  // inputs that exercise nothing.
  bool real_kind = d.kind == "normal" || d.kind == "uniform" || d.kind == "kaiming_uniform";
  if (real_kind && !is_floating(t.dtype))
    return problem{init / "kind", d.kind + " draws real numbers, but dtype is " + t.dtype +
                                      "; use randint, constant, zeros, ones or arange"};
  if (d.kind == "normal" && !(d.std > 0))
    return problem{init / "std", "expected a positive number, got " + format_double(d.std)};
  if ((d.kind == "uniform" || d.kind == "randint") && !(d.low < d.high))
    return problem{init / "high",
                   "expected high > low, got low " + format_double(d.low) + ", high " + format_double(d.high)};
  if (d.kind == "randint") {
    if (is_floating(t.dtype))
      return problem{init / "kind",
                     "randint makes integers, but dtype is " + t.dtype + "; use uniform for real numbers"};
    if (d.low != std::floor(d.low) || d.high != std::floor(d.high))
      return problem{init / "low", "randint bounds must be integers, got low " + format_double(d.low) + ", high " +
                                       format_double(d.high)};
    double lo = t.dtype == "int32" ? -2147483648.0 : t.dtype == "bool" ? 0.0 : -9.2e18;
    double hi = t.dtype == "int32" ? 2147483648.0 : t.dtype == "bool" ? 2.0 : 9.2e18;
    if (d.low < lo || d.high > hi)
      return problem{init / "high", "randint range [" + format_double(d.low) + ", " + format_double(d.high) +
                                        ") does not fit " + t.dtype};
  }
  if (d.kind == "arange" && t.dtype == "bool")
    return problem{init / "kind",
                   "arange on bool would be all true but the first; use "
                   "randint {low: 0, high: 2}"};
  if (d.kind == "kaiming_uniform" && t.shape.size() < 2)
    return problem{init / "kind", "kaiming_uniform needs rank >= 2 (fan_in = prod(shape[1:])), got shape " +
                                      format_shape(t.shape) + "; for a bias use uniform {low: -b, high: b}"};
  return std::nullopt;
}

// A number as Python writes it (repr of an int, float or bool): what get_inputs passed.
bool python_number(std::string_view s) {
  static const std::regex re("True|False|-?inf|nan|-?[0-9]+|-?([0-9]+\\.[0-9]*|\\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?");
  return std::regex_match(s.begin(), s.end(), re);
}

// reference.kernelbench: the problem's source, where Model sits in the module, and
// forward's arguments, each a task input (every input once) or a number.
std::optional<problem> check_kernelbench(const task_spec& t, const key_path& at) {
  const kernelbench_spec& kb = t.kernelbench;
  if (kb.source.find_first_not_of(" \t\r\n") == std::string::npos)
    return problem{at / "source", "expected the problem file's Python source, got nothing"};
  if (t.module_bytes.empty())
    return problem{at, "a KernelBench problem is imported as a module reference (reference.module)"};
  if (!kb.model_attr.empty() && !valid_attribute_path(kb.model_attr))
    return problem{at / "model_attr",
                   "expected the attribute path of Model in the module (e.g. inner), got " + quote(kb.model_attr)};
  if (!kb.model_attr.empty())
    for (size_t i = 0; i < t.parameters.size(); ++i)
      if (t.parameters[i].init.attr.rfind(kb.model_attr + ".", 0) != 0)
        return problem{at / "model_attr", "parameters[" + std::to_string(i) + "] (attr " +
                                              quote(t.parameters[i].init.attr) + ") is not inside " +
                                              quote(kb.model_attr)};
  if (kb.arguments.empty()) return problem{at / "arguments", "expected forward's arguments, got none"};
  std::set<std::string> names, inputs;
  for (size_t i = 0; i < kb.arguments.size(); ++i) {
    const kernelbench_argument& a = kb.arguments[i];
    key_path ai = (at / "arguments")[i];
    if (!valid_identifier(a.name)) return problem{ai / "name", "expected a Python name, got " + quote(a.name)};
    if (!names.insert(a.name).second) return problem{ai / "name", "duplicate argument " + quote(a.name)};
    if (a.input.empty() == a.value.empty())
      return problem{ai, "give either input (a task input's name) or value (the number get_inputs passes)"};
    if (!a.value.empty() && !python_number(a.value))
      return problem{ai / "value", "expected a number as Python writes it (3.14, 2, True, inf), got " + quote(a.value)};
    if (a.input.empty()) continue;
    bool known = false;
    for (const auto& in : t.inputs) known = known || in.name == a.input;
    if (!known) return problem{ai / "input", "no input is named " + quote(a.input)};
    if (!inputs.insert(a.input).second) return problem{ai / "input", "input " + quote(a.input) + " is named twice"};
  }
  for (const auto& in : t.inputs)
    if (!inputs.count(in.name))
      return problem{at / "arguments", "input " + quote(in.name) + " is none of forward's arguments"};
  return std::nullopt;
}

std::optional<problem> check_task(const task_spec& t) {
  key_path root;
  if (!valid_task_name(t.name)) return problem{root / "name", "expected [A-Za-z0-9_.-]+, got " + quote(t.name)};
  // A name becomes file names and command-line arguments (kernelskill-gpu, scripts): one
  // that starts with '-' would read as an option there.
  if (t.name[0] == '-')
    return problem{root / "name", quote(t.name) + " starts with '-' (it would read as an option on a command line)"};
  bool has_script = !t.torchscript.empty();
  bool has_module = !t.module_bytes.empty();
  if (has_script && t.module_training)
    return problem{root / "reference" / "training", "training is a mode of a module reference"};
  if (has_script == has_module)
    return problem{root / "reference", has_script ? "give either torchscript or module, not both"
                                                  : "expected torchscript (source defining forward) or module "
                                                    "(a torch.jit.save'd file)"};
  if (t.kernelbench != kernelbench_spec{})
    if (auto p = check_kernelbench(t, root / "reference" / "kernelbench")) return p;
  if (has_script) {
    static const std::regex def_forward(R"(def\s+forward\s*\()");
    if (!std::regex_search(t.torchscript, def_forward))
      return problem{root / "reference" / "torchscript", "the source does not define forward(...)"};
  }
  for (size_t i = 0; i < t.parameters.size(); ++i) {
    const distribution_spec& d = t.parameters[i].init;
    key_path at = (root / "parameters")[i] / "init";
    if (has_module && d.kind != "module")
      return problem{at / "kind",
                     "a module reference carries its own parameters and its forward takes "
                     "the inputs only: a parameter names the module attribute it mirrors "
                     "({kind: module, attr: ...}); declare other tensors as inputs"};
    if (!has_module && d.kind == "module")
      return problem{at / "kind",
                     "kind module takes a module attribute, but the reference is "
                     "TorchScript source"};
    if (d.kind == "program") return problem{at / "kind", "kind program makes inputs only (from input_program)"};
  }
  if (t.inputs.empty()) return problem{root / "inputs", "expected at least one input"};
  static const std::regex def_inputs(R"(def\s+inputs\s*\()");
  if (!t.input_program.empty() && !std::regex_search(t.input_program, def_inputs))
    return problem{root / "input_program", "the source does not define inputs(device: Device) -> List[Tensor]"};
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    const std::string& kind = t.inputs[i].init.kind;
    key_path at = (root / "inputs")[i] / "init" / "kind";
    if (kind == "module") return problem{at, "kind module is for parameters, which mirror a module attribute"};
    if (t.input_program.empty() && kind == "program") return problem{at, "kind program needs the task's input_program"};
    if (!t.input_program.empty() && kind != "program")
      return problem{at,
                     "input_program makes every input; leave out init or write "
                     "init: program (got " +
                         quote(kind) + ")"};
  }

  std::map<std::string, const tensor_spec*> by_name;
  for (auto [list, key] : {std::pair{&t.inputs, "inputs"}, std::pair{&t.parameters, "parameters"}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const tensor_spec& ts = (*list)[i];
      if (auto p = check_tensor(ts, (root / key)[i])) return p;
      if (!by_name.emplace(ts.name, &ts).second)
        return problem{(root / key)[i] / "name",
                       "duplicate tensor name " + quote(ts.name) + " (names are shared by inputs and parameters)"};
    }
  }

  for (auto [name, v] : {std::pair{"atol", t.tolerance.atol}, std::pair{"rtol", t.tolerance.rtol}}) {
    if (!std::isfinite(v) || v < 0)
      return problem{root / "tolerance" / name, "expected a number >= 0, got " + format_double(v)};
  }

  std::vector<std::string> names;
  for (const auto& [n, _] : by_name) names.push_back(n);
  for (const auto& [size, shapes] : t.sizes) {
    key_path at = root / "sizes" / size;
    if (!valid_task_name(size)) return problem{at, "size names are [A-Za-z0-9_.-]+, got " + quote(size)};
    if (shapes.empty()) return problem{at, "expected a map of tensor name to shape"};
    for (const auto& [tensor, shape] : shapes) {
      auto it = by_name.find(tensor);
      if (it == by_name.end())
        return problem{at / tensor, "no input or parameter is named " + quote(tensor) + did_you_mean(tensor, names) +
                                        "; the tensors are " + join(names)};
      if (auto p = check_shape(shape, at / tensor)) return p;
      if (shape.size() != it->second->shape.size())
        return problem{at / tensor, "expected rank " + std::to_string(it->second->shape.size()) + " like " +
                                        format_shape(it->second->shape) + ", got " + format_shape(shape)};
      if (it->second->init.kind == "kaiming_uniform" && shape.size() < 2)
        return problem{at / tensor, "kaiming_uniform needs rank >= 2"};
      if (it->second->init.kind == "program" || it->second->init.kind == "module")
        return problem{at / tensor, "a tensor of kind " + it->second->init.kind + " has the shape its " +
                                        (it->second->init.kind == "program" ? "input_program makes" : "module holds") +
                                        "; a size cannot change it"};
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// YAML reading. Failures are thrown as parse_failure inside this file only and turned
// into ks::error at the API boundary; it keeps the many small checks readable.

struct parse_failure {
  std::string message;
};

class task_parser {
 public:
  task_parser(std::string source, std::filesystem::path base_dir)
      : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  task_spec parse(const YAML::Node& root) {
    task_spec t;
    key_path top;
    auto keys = check_map(root, top, kTopKeys, "a task (a map with name, reference, inputs, ...)");
    t.name = string_at(require(keys, root, top, "name"), top / "name");
    if (auto* n = find(keys, "description")) t.description = string_at(*n, top / "description");
    parse_reference(require(keys, root, top, "reference"), t);
    if (auto* n = find(keys, "input_program")) {
      t.input_program = string_at(*n, top / "input_program");
      if (t.input_program.find_first_not_of(" \t\r\n") == std::string::npos)
        fail(*n, top / "input_program", "expected TorchScript source, got nothing");
    }
    t.inputs = parse_tensors(require(keys, root, top, "inputs"), top / "inputs", !t.input_program.empty());
    if (auto* n = find(keys, "parameters")) t.parameters = parse_tensors(*n, top / "parameters");
    t.tolerance = default_tolerance(t);
    if (auto* n = find(keys, "tolerance")) {
      auto tk = check_map(*n, top / "tolerance", kToleranceKeys, "a map {atol, rtol}");
      if (auto* a = find(tk, "atol")) t.tolerance.atol = number_at(*a, top / "tolerance" / "atol");
      if (auto* r = find(tk, "rtol")) t.tolerance.rtol = number_at(*r, top / "tolerance" / "rtol");
    }
    if (auto* n = find(keys, "seed")) t.seed = seed_at(*n, top / "seed");
    if (auto* n = find(keys, "sizes")) parse_sizes(*n, t);

    if (auto p = check_task(t)) fail(locate(root, p->where), p->where, p->what);
    return t;
  }

  [[noreturn]] void fail(const YAML::Node& at, const key_path& where, const std::string& what) const {
    std::string pos = source_;
    YAML::Mark m = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    if (!m.is_null()) pos += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    throw parse_failure{pos + ": " + where.str() + ": " + what};
  }

 private:
  using key_map = std::vector<std::pair<std::string, YAML::Node>>;

  static const YAML::Node* find(const key_map& keys, std::string_view key) {
    for (const auto& [k, v] : keys)
      if (k == key) return &v;
    return nullptr;
  }

  const YAML::Node& require(const key_map& keys, const YAML::Node& map, const key_path& at,
                            const std::string& key) const {
    if (auto* n = find(keys, key)) return *n;
    fail(map, at / key, "required key is missing");
  }

  static std::string describe(const YAML::Node& n) {
    if (n.IsScalar()) return quote(n.Scalar());
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a map";
    return "nothing";
  }

  // The node's keys, in order, after checking that they are all known and unique.
  template <class Range>
  key_map check_map(const YAML::Node& node, const key_path& at, const Range& allowed,
                    const std::string& expected) const {
    if (!node.IsMap()) fail(node, at, "expected " + expected + ", got " + describe(node));
    key_map out;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) fail(it->first, at, "keys must be plain words");
      std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(it->first, at / key, "unknown key" + did_you_mean(key, allowed) + "; expected one of " + join(allowed));
      if (find(out, key)) fail(it->first, at / key, "duplicate key");
      out.emplace_back(key, it->second);
    }
    return out;
  }

  std::string string_at(const YAML::Node& n, const key_path& at) const {
    if (!n.IsScalar()) fail(n, at, "expected text, got " + describe(n));
    return n.Scalar();
  }

  double number_at(const YAML::Node& n, const key_path& at) const {
    std::string s = n.IsScalar() ? n.Scalar() : "";
    if (n.IsScalar() && !s.empty()) {
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(s.c_str(), &end);
      if (end == s.c_str() + s.size() && errno == 0 && std::isfinite(v)) return v;
    }
    fail(n, at, "expected a number, got " + describe(n));
  }

  std::optional<int64_t> integer(const YAML::Node& n) const {
    if (!n.IsScalar()) return std::nullopt;
    const std::string& s = n.Scalar();
    const char* b = s.data() + (s.size() > 1 && s[0] == '+' ? 1 : 0);
    int64_t v = 0;
    auto r = std::from_chars(b, s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || b == s.data() + s.size()) return std::nullopt;
    return v;
  }

  uint64_t seed_at(const YAML::Node& n, const key_path& at) const {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      uint64_t v = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return v;
    }
    fail(n, at, "expected an integer in [0, 2^64), got " + describe(n));
  }

  std::vector<int64_t> shape_at(const YAML::Node& n, const key_path& at) const {
    if (!n.IsSequence()) fail(n, at, "expected a list of positive integers, got " + describe(n));
    std::vector<int64_t> shape;
    for (size_t i = 0; i < n.size(); ++i) {
      auto v = integer(n[i]);
      if (!v) fail(n[i], at[i], "expected a positive integer, got " + describe(n[i]));
      shape.push_back(*v);
    }
    return shape;
  }

  void parse_reference(const YAML::Node& n, task_spec& t) {
    key_path at = key_path{} / "reference";
    auto keys = check_map(n, at, kReferenceKeys, "a map with torchscript or module");
    const YAML::Node* script = find(keys, "torchscript");
    const YAML::Node* module = find(keys, "module");
    if (const YAML::Node* training = find(keys, "training")) {
      if (!module) fail(*training, at / "training", "training is a mode of a module reference");
      std::string v = string_at(*training, at / "training");
      if (v != "true" && v != "false") fail(*training, at / "training", "expected true or false, got " + quote(v));
      t.module_training = v == "true";
    }
    if (const YAML::Node* kb = find(keys, "kernelbench")) parse_kernelbench(*kb, at / "kernelbench", t);
    if ((script != nullptr) == (module != nullptr))
      fail(n, at,
           script ? "give either torchscript or module, not both"
                  : "expected torchscript (source defining forward) or module (a "
                    "torch.jit.save'd file)");
    if (script) {
      t.torchscript = string_at(*script, at / "torchscript");
      if (t.torchscript.find_first_not_of(" \t\r\n") == std::string::npos)
        fail(*script, at / "torchscript", "expected TorchScript source, got nothing");
      return;
    }
    std::string rel = string_at(*module, at / "module");
    if (rel.empty()) fail(*module, at / "module", "expected a path to a .pt file");
    std::filesystem::path p = base_dir_ / rel;
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(p, ec).lexically_normal();
    if (!ec) p = abs;
    if (!std::filesystem::is_regular_file(p, ec))
      fail(*module, at / "module", "module file " + quote(p.string()) + " does not exist");
    // Mapped, not read: copies of the task share the mapping, and a run of many
    // networks keeps no weights in its own memory (2_ShallowWideMLP's are 8.6 GB).
    auto bytes = shared_bytes::map_file(p);
    if (!bytes || bytes->empty())
      fail(*module, at / "module",
           "cannot read module file " + quote(p.string()) + " (" + (bytes ? "empty" : bytes.message()) + ")");
    t.module_bytes = std::move(*bytes);
    t.module_path = p.string();
  }

  void parse_kernelbench(const YAML::Node& n, const key_path& at, task_spec& t) const {
    auto keys = check_map(n, at, kKernelbenchKeys, "a map {source, model_attr, arguments}");
    kernelbench_spec& kb = t.kernelbench;
    kb.source = string_at(require(keys, n, at, "source"), at / "source");
    if (auto* m = find(keys, "model_attr")) kb.model_attr = string_at(*m, at / "model_attr");
    const YAML::Node& args = require(keys, n, at, "arguments");
    if (!args.IsSequence())
      fail(args, at / "arguments", "expected a list of {name, input} or {name, value}, got " + describe(args));
    for (size_t i = 0; i < args.size(); ++i) {
      auto ak = check_map(args[i], (at / "arguments")[i], kArgumentKeys, "{name, input} or {name, value}");
      kernelbench_argument a;
      a.name = string_at(require(ak, args[i], (at / "arguments")[i], "name"), (at / "arguments")[i] / "name");
      if (auto* v = find(ak, "input")) a.input = string_at(*v, (at / "arguments")[i] / "input");
      if (auto* v = find(ak, "value")) a.value = string_at(*v, (at / "arguments")[i] / "value");
      kb.arguments.push_back(std::move(a));
    }
  }

  std::vector<tensor_spec> parse_tensors(const YAML::Node& n, const key_path& at, bool by_program = false) const {
    if (n.IsNull()) return {};
    if (!n.IsSequence()) fail(n, at, "expected a list of tensors ({name, shape, dtype, init}), got " + describe(n));
    std::vector<tensor_spec> out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(parse_tensor(n[i], at[i], by_program));
    return out;
  }

  tensor_spec parse_tensor(const YAML::Node& n, const key_path& at, bool by_program) const {
    auto keys = check_map(n, at, kTensorKeys, "a tensor {name, shape, dtype, init}");
    tensor_spec t;
    t.name = string_at(require(keys, n, at, "name"), at / "name");
    t.shape = shape_at(require(keys, n, at, "shape"), at / "shape");
    if (auto* d = find(keys, "dtype")) t.dtype = string_at(*d, at / "dtype");
    // Without init: standard normal for real numbers, small non-negative integers for
    // integer tensors (which are usually indices or counts), fair coin flips for bool.
    if (t.dtype == "bool")
      t.init = {.kind = "randint", .low = 0, .high = 2};
    else if (is_integral(t.dtype))
      t.init = {.kind = "randint", .low = 0, .high = 10};
    if (by_program) t.init = {.kind = "program"};  // the task's input_program makes it
    if (auto* i = find(keys, "init")) t.init = parse_init(*i, at / "init");
    return t;
  }

  distribution_spec parse_init(const YAML::Node& n, const key_path& at) const {
    distribution_spec d;
    if (n.IsScalar()) {  // `init: zeros` is short for `init: {kind: zeros}`
      d.kind = n.Scalar();
      check_kind(n, at / "kind", d.kind);
      if (!init_params(d.kind).empty())
        fail(n, at,
             d.kind + " needs its parameters: write init: {kind: " + d.kind + ", " + join(init_params(d.kind)) + "}");
      return d;
    }
    auto keys = check_map(n, at, kInitKeys, "a distribution {kind, ...} or a kind name");
    const YAML::Node& kind = require(keys, n, at, "kind");
    d.kind = string_at(kind, at / "kind");
    check_kind(kind, at / "kind", d.kind);
    auto params = init_params(d.kind);
    for (const auto& [key, value] : keys) {
      if (key == "kind") continue;
      if (std::find(params.begin(), params.end(), key) == params.end())
        fail(value, at / key,
             d.kind + " does not take " + key +
                 (params.empty() ? "; it takes no parameters" : "; it takes " + join(params)));
      if (key == "attr") {
        d.attr = string_at(value, at / key);
        continue;
      }
      double v = number_at(value, at / key);
      if (key == "mean")
        d.mean = v;
      else if (key == "std")
        d.std = v;
      else if (key == "low")
        d.low = v;
      else if (key == "high")
        d.high = v;
      else
        d.value = v;
    }
    if (d.kind == "randint" && !find(keys, "high"))
      fail(n, at / "high", "randint needs high (exclusive upper bound; low defaults to 0)");
    if (d.kind == "constant" && !find(keys, "value")) fail(n, at / "value", "constant needs value");
    if (d.kind == "module" && !find(keys, "attr"))
      fail(n, at / "attr", "module needs attr, the module attribute the parameter mirrors");
    return d;
  }

  void check_kind(const YAML::Node& n, const key_path& at, const std::string& kind) const {
    if (std::find(kInitKinds.begin(), kInitKinds.end(), kind) == kInitKinds.end())
      fail(n, at, "expected one of " + join(kInitKinds) + ", got " + quote(kind) + did_you_mean(kind, kInitKinds));
  }

  void parse_sizes(const YAML::Node& n, task_spec& t) const {
    key_path at = key_path{} / "sizes";
    if (!n.IsMap()) fail(n, at, "expected a map of size name to {tensor: shape}, got " + describe(n));
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string size = string_at(it->first, at);
      if (t.sizes.count(size)) fail(it->first, at / size, "duplicate size");
      auto& shapes = t.sizes[size];
      const YAML::Node m = it->second;  // by value: it-> is a temporary proxy
      if (!m.IsMap()) fail(m, at / size, "expected a map of tensor name to shape, got " + describe(m));
      for (auto jt = m.begin(); jt != m.end(); ++jt) {
        std::string tensor = string_at(jt->first, at / size);
        if (shapes.count(tensor)) fail(jt->first, at / size / tensor, "duplicate key");
        shapes[tensor] = shape_at(jt->second, at / size / tensor);
      }
    }
  }

  // The deepest node on `path` that the document has, for the line number of a
  // semantic error (a defaulted value has no node of its own: point at its parent).
  static YAML::Node locate(const YAML::Node& root, const key_path& path) {
    YAML::Node cur = root;
    for (const auto& part : path.parts) {
      YAML::Node next;
      if (auto* key = std::get_if<std::string>(&part)) {
        if (!cur.IsMap()) break;
        for (auto it = cur.begin(); it != cur.end(); ++it)
          if (it->first.IsScalar() && it->first.Scalar() == *key) next = it->second;
      } else {
        size_t i = std::get<size_t>(part);
        if (!cur.IsSequence() || i >= cur.size()) break;
        next = cur[i];
      }
      if (!next.IsDefined() || next.IsNull()) break;
      cur = next;
    }
    return cur;
  }

  std::string source_;
  std::filesystem::path base_dir_;
};

// ---------------------------------------------------------------------------
// YAML writing.

bool literal_safe(const std::string& s) {
  // A literal block (|) reads back with exactly one final newline, and cannot start
  // with a space or hold whitespace-only lines without indentation indicators.
  if (s.empty() || s.back() != '\n' || (s.size() > 1 && s[s.size() - 2] == '\n')) return false;
  if (s[0] == ' ' || s.find('\r') != std::string::npos || s.find('\t') != std::string::npos) return false;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.find_first_not_of(' ') == std::string::npos) return false;
    if (!line.empty() && line.back() == ' ') return false;
  }
  return true;
}

void emit_shape(YAML::Emitter& out, const std::vector<int64_t>& shape) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int64_t d : shape) out << d;
  out << YAML::EndSeq;
}

void emit_tensors(YAML::Emitter& out, const std::vector<tensor_spec>& tensors) {
  out << YAML::BeginSeq;
  for (const auto& t : tensors) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << t.name;
    out << YAML::Key << "shape" << YAML::Value;
    emit_shape(out, t.shape);
    out << YAML::Key << "dtype" << YAML::Value << t.dtype;
    out << YAML::Key << "init" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "kind" << YAML::Value << t.init.kind;
    for (auto p : init_params(t.init.kind)) {
      if (p == "attr") {
        out << YAML::Key << "attr" << YAML::Value << t.init.attr;
        continue;
      }
      double v = p == "mean"   ? t.init.mean
                 : p == "std"  ? t.init.std
                 : p == "low"  ? t.init.low
                 : p == "high" ? t.init.high
                               : t.init.value;
      out << YAML::Key << std::string(p) << YAML::Value << format_double(v);
    }
    out << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void emit_kernelbench(YAML::Emitter& out, const kernelbench_spec& kb) {
  out << YAML::Key << "kernelbench" << YAML::Value << YAML::BeginMap;
  if (!kb.model_attr.empty()) out << YAML::Key << "model_attr" << YAML::Value << kb.model_attr;
  out << YAML::Key << "arguments" << YAML::Value << YAML::BeginSeq;
  for (const auto& a : kb.arguments) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << a.name;
    if (!a.input.empty()) out << YAML::Key << "input" << YAML::Value << a.input;
    if (!a.value.empty()) out << YAML::Key << "value" << YAML::Value << YAML::DoubleQuoted << a.value;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::Key << "source" << YAML::Value;
  if (literal_safe(kb.source))
    out << YAML::Literal << kb.source.substr(0, kb.source.size() - 1);
  else
    out << YAML::DoubleQuoted << kb.source;
  out << YAML::EndMap;
}

}  // namespace

tolerance_spec default_tolerance(const task_spec& task) {
  tolerance_spec tol{.atol = 1e-4, .rtol = 1e-4};
  for (const auto* list : {&task.inputs, &task.parameters}) {
    for (const auto& t : *list) {
      double v = t.dtype == "float16" ? 1e-2 : t.dtype == "bfloat16" ? 2e-2 : 1e-4;
      tol.atol = std::max(tol.atol, v);
      tol.rtol = std::max(tol.rtol, v);
    }
  }
  return tol;
}

result<task_spec> parse_task(const std::string& yaml, const std::string& source_name,
                             const std::filesystem::path& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    std::string pos = source_name;
    if (!e.mark.is_null()) pos += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    return error{pos + ": invalid YAML: " + e.msg};
  }
  try {
    task_parser parser(source_name, base_dir.empty() ? std::filesystem::path(".") : base_dir);
    return parser.parse(root);
  } catch (const parse_failure& f) {
    return error{f.message};
  } catch (const YAML::Exception& e) {  // not expected: every access is checked first
    return error{source_name + ": " + e.what()};
  }
}

result<task_spec> load_task(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return error{path.string() + ": no such task file"};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return error{path.string() + ": cannot read: " + std::strerror(errno)};
  return parse_task(text.str(), path.string(), path.parent_path());
}

status validate_task(const task_spec& task) {
  if (auto p = check_task(task)) return error{"task " + quote(task.name) + ": " + p->where.str() + ": " + p->what};
  return status::success();
}

result<task_spec> with_size(const task_spec& task, const std::string& size_name) {
  auto it = task.sizes.find(size_name);
  if (it == task.sizes.end()) {
    std::vector<std::string> names;
    for (const auto& [n, _] : task.sizes) names.push_back(n);
    return error{"task " + quote(task.name) + " has no size " + quote(size_name) + did_you_mean(size_name, names) +
                 (names.empty() ? "; it defines no sizes" : "; it has " + join(names))};
  }
  task_spec out = task;
  for (const auto& [tensor, shape] : it->second) {
    tensor_spec* target = nullptr;
    for (auto* list : {&out.inputs, &out.parameters})
      for (auto& t : *list)
        if (t.name == tensor) target = &t;
    if (!target)
      return error{"task " + quote(task.name) + ": sizes." + size_name + "." + tensor +
                   ": no input or parameter is named " + quote(tensor)};
    if (target->shape.size() != shape.size())
      return error{"task " + quote(task.name) + ": sizes." + size_name + "." + tensor + ": expected rank " +
                   std::to_string(target->shape.size()) + ", got " + format_shape(shape)};
    target->shape = shape;
  }
  return out;
}

std::string to_yaml(const task_spec& t) { return to_yaml(t, t.module_path); }

std::string to_yaml(const task_spec& t, const std::string& module_path) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << t.name;
  if (!t.description.empty()) out << YAML::Key << "description" << YAML::Value << t.description;
  out << YAML::Key << "reference" << YAML::Value << YAML::BeginMap;
  if (!t.torchscript.empty()) {
    out << YAML::Key << "torchscript" << YAML::Value;
    // A literal block's final newline is implied (clip chomping): emit the source
    // without it, or the file gains a blank line.
    if (literal_safe(t.torchscript))
      out << YAML::Literal << t.torchscript.substr(0, t.torchscript.size() - 1);
    else
      out << YAML::DoubleQuoted << t.torchscript;
  } else {
    // Bytes are never inlined; without a path the result names what is missing and
    // fails to load, rather than loading a different program.
    out << YAML::Key << "module" << YAML::Value
        << (module_path.empty() ? std::string("<module bytes without a path>") : module_path);
    if (t.module_training) out << YAML::Key << "training" << YAML::Value << true;
  }
  if (t.kernelbench != kernelbench_spec{}) emit_kernelbench(out, t.kernelbench);
  out << YAML::EndMap;
  out << YAML::Key << "inputs" << YAML::Value;
  emit_tensors(out, t.inputs);
  if (!t.input_program.empty()) {
    out << YAML::Key << "input_program" << YAML::Value;
    if (literal_safe(t.input_program))
      out << YAML::Literal << t.input_program.substr(0, t.input_program.size() - 1);
    else
      out << YAML::DoubleQuoted << t.input_program;
  }
  if (!t.parameters.empty()) {
    out << YAML::Key << "parameters" << YAML::Value;
    emit_tensors(out, t.parameters);
  }
  out << YAML::Key << "tolerance" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "atol" << YAML::Value
      << format_double(t.tolerance.atol) << YAML::Key << "rtol" << YAML::Value << format_double(t.tolerance.rtol)
      << YAML::EndMap;
  out << YAML::Key << "seed" << YAML::Value << t.seed;
  if (!t.sizes.empty()) {
    out << YAML::Key << "sizes" << YAML::Value << YAML::BeginMap;
    for (const auto& [size, shapes] : t.sizes) {
      out << YAML::Key << size << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [tensor, shape] : shapes) {
        out << YAML::Key << tensor << YAML::Value;
        emit_shape(out, shape);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace ks
