#include "export/general_launcher.hpp"

#include <cctype>
#include <charconv>
#include <map>
#include <sstream>
#include <utility>

#include "export/library_steps.hpp"
#include "export/source_text.hpp"
#include "plan/plan_validator.hpp"
#include "plan/shape_expr.hpp"

namespace ks::export_detail {

namespace {

// Translates one plan expression into a C++ expression of type ks_v. `tensor` maps a
// tensor name the expression may read to its C++ variable (or returns empty: not
// available here); constants are c_NAME.
class expr_translator {
 public:
  // share: given a call the translation composed (an operation, a function, a shape
  // read), the text to use for it (itself, or a variable holding its value); may be empty.
  expr_translator(std::string text, const std::set<std::string>& constants,
                  std::function<std::string(const std::string&)> tensor,
                  std::function<std::string(std::string)> share = {})
      : t_(std::move(text)), constants_(constants), tensor_(std::move(tensor)), share_(std::move(share)) {}

  result<std::string> run() {
    auto e = expr();
    if (!e) return e;
    skip();
    if (p_ != t_.size()) return fail("unexpected text");
    return e;
  }

 private:
  void skip() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  error fail(const std::string& what) {
    return error{what + " at column " + std::to_string(p_ + 1) + " in \"" + t_ + "\""};
  }
  std::string name() {
    skip();
    size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
    return t_.substr(b, p_ - b);
  }
  result<std::string> expr() {
    auto a = term();
    if (!a) return a;
    std::string out = *a;
    while (true) {
      skip();
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) {
        char op = t_[p_++];
        auto b = term();
        if (!b) return b;
        out = shared(std::string(op == '+' ? "ks_add(" : "ks_sub(") + out + ", " + *b + ")");
      } else {
        return out;
      }
    }
  }
  result<std::string> term() {
    auto a = unary();
    if (!a) return a;
    std::string out = *a;
    while (true) {
      skip();
      if (p_ < t_.size() && (t_[p_] == '*' || t_[p_] == '/' || t_[p_] == '%')) {
        char op = t_[p_++];
        auto b = unary();
        if (!b) return b;
        out = shared(std::string(op == '*' ? "ks_mul(" : op == '/' ? "ks_div(" : "ks_mod(") + out + ", " + *b + ")");
      } else {
        return out;
      }
    }
  }
  result<std::string> unary() {
    if (eat('-')) {
      auto a = unary();
      if (!a) return a;
      return shared("ks_neg(" + *a + ")");
    }
    if (eat('+')) return unary();
    return primary();
  }
  result<std::string> primary() {
    skip();
    if (p_ >= t_.size()) return fail("unexpected end");
    char c = t_[p_];
    if (c == '(') {
      ++p_;
      auto e = expr();
      if (!e) return e;
      if (!eat(')')) return fail("expected ')'");
      return share_ ? *e : "(" + *e + ")";  // a shared call is one name or one call: no parentheses needed
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t b = p_;
      bool is_float = false;
      while (p_ < t_.size()) {
        char d = t_[p_];
        if (std::isdigit(static_cast<unsigned char>(d))) {
          ++p_;
        } else if (d == '.') {
          is_float = true;
          ++p_;
        } else if ((d == 'e' || d == 'E')) {
          is_float = true;
          ++p_;
          if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
        } else {
          break;
        }
      }
      std::string lit = t_.substr(b, p_ - b);
      if (is_float) {
        double v = 0;
        auto [q, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), v);
        if (ec != std::errc() || q != lit.data() + lit.size()) return fail("bad number '" + lit + "'");
        return "ks_real(" + number(v) + ")";
      }
      int64_t v = 0;
      auto [q, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), v);
      if (ec != std::errc() || q != lit.data() + lit.size()) return fail("bad integer '" + lit + "'");
      return "ks_int(" + std::to_string(v) + "LL)";
    }
    std::string n = name();
    if (n.empty()) return fail(std::string("unexpected '") + c + "'");
    if (eat('(')) {
      static const std::map<std::string, size_t> fns = {{"ceil_div", 2}, {"round_up", 2}, {"min", 2},  {"max", 2},
                                                        {"abs", 1},      {"floor", 1},    {"ceil", 1}, {"sqrt", 1}};
      auto f = fns.find(n);
      if (f == fns.end()) return fail("unknown function '" + n + "'");
      std::vector<std::string> args;
      if (!eat(')')) {
        while (true) {
          auto a = expr();
          if (!a) return a;
          args.push_back(*a);
          if (eat(')')) break;
          if (!eat(',')) return fail("expected ',' or ')'");
        }
      }
      if (args.size() != f->second) return fail(n + " takes " + std::to_string(f->second) + " arguments");
      return shared("ks_" + n + "(" + join(args, ", ") + ")");
    }
    if (eat('.')) {
      std::string var = tensor_(n);
      if (var.empty()) return fail("tensor '" + n + "' is not available here");
      std::string prop = name();
      if (prop == "numel") return shared("ks_numel(" + var + ")");
      if (prop == "ndim") return shared("ks_ndim(" + var + ")");
      if (prop != "shape" || !eat('[')) return fail("expected numel, ndim or shape[i]");
      auto i = expr();
      if (!i) return i;
      if (!eat(']')) return fail("expected ']'");
      return shared("ks_dim(" + var + ", " + *i + ", " + cpp_string(n) + ")");
    }
    if (!constants_.count(n)) return fail("unknown name '" + n + "'");
    return "c_" + ident(n);
  }

  std::string shared(std::string call) { return share_ ? share_(std::move(call)) : call; }

  std::string t_;
  size_t p_ = 0;
  const std::set<std::string>& constants_;
  std::function<std::string(const std::string&)> tensor_;
  std::function<std::string(std::string)> share_;
};

// The variable holding `call`'s value: the one `shared` names for it, or a new one
// whose declaration goes to the end of `declarations`.
std::string share_call(std::map<std::string, std::string>& shared, std::string& declarations, std::string call) {
  auto [it, fresh] = shared.emplace(std::move(call), "e_" + std::to_string(shared.size()));
  if (fresh) declarations += "  const ks_v " + it->second + " = " + it->first + ";\n";
  return it->second;
}

// Writes ks_run_general: the tensors in, the constants, the buffers, then each step.
// `available_` holds the tensors declared so far (an expression may read only those).
class general_writer {
 public:
  general_writer(const task_spec& task, const launch_plan& plan, const std::vector<kernel_signature>& kernels)
      : task_(task), plan_(plan), kernels_(kernels), kernel_reads_(tensors_read_by_kernels(plan)) {
    for (auto& [k, _] : plan.constants) constants_.insert(k);
    for (const auto& b : plan.scratch) scratch_.insert(b.name);
  }

  result<std::string> run() {
    o_ << "// The plan evaluated for the shapes forward() receives (any shapes; the launch\n"
       << "// itself then checks what the GPU allows).\n"
       << "static std::vector<at::Tensor> ks_run_general(const std::vector<at::Tensor>& in) {\n"
       << "  const at::TensorOptions options = at::TensorOptions().device(in[0].device());\n"
       << "  cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n"
       << "  (void)stream;\n";
    size_t k = 0;
    for (const auto* list : {&task_.inputs, &task_.parameters})
      for (const auto& t : *list) {
        o_ << "  const at::Tensor& " << var(t.name) << " = in[" << k++ << "];\n";
        available_.insert(t.name);
      }
    if (auto st = constants(); !st) return error{st.message()};
    if (auto st = buffers(); !st) return error{st.message()};
    for (size_t si = 0; si < plan_.steps.size(); ++si) {
      const plan_step& s = plan_.steps[si];
      const std::string label = "step " + std::to_string(si) + " (" + s.kind + " " + s.name + ")";
      o_ << "  // " << label << "\n";
      auto step = s.kind == "kernel" ? kernel_step(s, label) : library_step_block(s, si, label);
      if (!step) return error{step.message()};
      o_ << take_pending() << *step;
    }
    o_ << "  return {";
    for (size_t i = 0; i < plan_.outputs.size(); ++i) o_ << (i ? ", " : "") << var(plan_.outputs[i].name);
    o_ << "};\n}\n";
    return o_.str();
  }

 private:
  // Every call the expressions compose is computed once, into a variable declared at
  // the function's scope before the statement that first needs it (pending_), and
  // named again wherever the same call recurs. A network's shapes are expressions of
  // its input's: written out whole, each layer's repeated every earlier layer's (the
  // general launcher of level 3's 11_VGG16 was 338 KB of C++ and took 250 s to build,
  // 10_ResNet101's 10 MB). The values are the same: the calls are pure, and a tensor
  // an expression reads is declared, with its final shape, before the statement.
  result<std::string> tr(const std::string& text) {
    return translate(
        text, constants_, [&](const std::string& n) { return available_.count(n) ? var(n) : std::string(); }, &shared_,
        &pending_);
  }

  // The declarations the statement about to be written needs, written before it.
  std::string take_pending() { return std::exchange(pending_, std::string()); }

  // Constants in dependency order.
  status constants() {
    std::map<std::string, std::vector<std::string>> deps;
    for (auto& [name, text] : plan_.constants) {
      auto e = shape_expr::parse(text);
      if (!e) return error{"constants." + name + ": " + e.message()};
      deps[name] = e->constant_names();
    }
    std::set<std::string> emitted;
    while (emitted.size() < plan_.constants.size()) {
      bool progress = false;
      for (auto& [name, text] : plan_.constants) {
        if (emitted.count(name)) continue;
        bool ready = true;
        for (auto& d : deps[name]) ready = ready && emitted.count(d);
        if (!ready) continue;
        auto e = tr(text);
        if (!e) return error{"constants." + name + ": " + e.message()};
        o_ << take_pending() << "  const ks_v c_" << ident(name) << " = " << *e << ";\n";
        emitted.insert(name);
        progress = true;
      }
      if (!progress) return error{"constants: a cycle"};
    }
    return {};
  }

  // Outputs and scratch, their shapes evaluated and checked.
  status buffers() {
    auto dims_of = [&](const buffer_spec& b, const std::string& where) -> result<std::string> {
      std::string out = "std::vector<int64_t>{";
      for (size_t i = 0; i < b.shape.size(); ++i) {
        auto e = tr(b.shape[i]);
        if (!e) return error{where + ".shape[" + std::to_string(i) + "]: " + e.message()};
        out += (i ? ", " : "") + std::string("ks_in_range(") + *e + ", 0, INT64_MAX, " +
               cpp_string(where + " shape[" + std::to_string(i) + "]") + ")";
      }
      return out + "}";
    };
    for (const auto* list : {&plan_.outputs, &plan_.scratch})
      for (size_t i = 0; i < list->size(); ++i) {
        const buffer_spec& b = (*list)[i];
        const std::string where = std::string(list == &plan_.outputs ? "outputs" : "scratch") + "[" +
                                  std::to_string(i) + "] '" + b.name + "'";
        auto shape = dims_of(b, where);
        if (!shape) return error{shape.message()};
        const char* dt = aten_dtype(b.dtype);
        if (!dt) return error{where + ": dtype " + b.dtype + " cannot be exported"};
        o_ << take_pending() << "  at::Tensor " << var(b.name) << " = at::" << (b.init == "zeros" ? "zeros" : "empty")
           << "(" << *shape << ", options.dtype(" << dt << "));\n";
        available_.insert(b.name);
      }
    return {};
  }

  // A kernel step in its own block: grid, block and shared memory evaluated and
  // range-checked, the kernel's shared memory limit raised as needed, then the launch.
  result<std::string> kernel_step(const plan_step& s, const std::string& label) {
    std::ostringstream o;
    o << "  {\n";
    const kernel_signature* sig = find_kernel(kernels_, s.name);
    if (!sig || sig->params.size() != s.args.size()) return error{label + ": the kernel's signature does not fit"};
    const char* axis = "xyz";
    for (int d = 0; d < 3; ++d) {
      std::string g = d < static_cast<int>(s.grid.size()) ? s.grid[d] : "1";
      std::string bl = d < static_cast<int>(s.block.size()) ? s.block[d] : "1";
      auto eg = tr(g);
      if (!eg) return error{label + ": grid[" + std::to_string(d) + "]: " + eg.message()};
      auto eb = tr(bl);
      if (!eb) return error{label + ": block[" + std::to_string(d) + "]: " + eb.message()};
      o << "    const int64_t grid_" << axis[d] << " = ks_in_range(" << *eg << ", 1, "
        << (d == 0 ? "2147483647" : "65535") << ", " << cpp_string(label + " grid[" + std::to_string(d) + "]") << ");\n"
        << "    const int64_t block_" << axis[d] << " = ks_in_range(" << *eb << ", 1, " << (d == 2 ? "64" : "1024")
        << ", " << cpp_string(label + " block[" + std::to_string(d) + "]") << ");\n";
    }
    auto sm = tr(s.shared_mem.empty() ? "0" : s.shared_mem);
    if (!sm) return error{label + ": shared_mem: " + sm.message()};
    o << "    const int64_t smem = ks_in_range(" << *sm << ", 0, 232448, " << cpp_string(label + " shared_mem")
      << ");\n"
      << "    static int64_t smem_raised = 0;  // the kernel's dynamic shared memory limit, raised as needed\n"
      << "    if (smem > smem_raised) {\n"
      << "      C10_CUDA_CHECK(cudaFuncSetAttribute(" << s.name
      << ", cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));\n"
      << "      smem_raised = smem;\n    }\n";
    std::vector<std::string> args;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const plan_arg& a = s.args[i];
      const kernel_param& p = sig->params[i];
      const std::string where = label + " args[" + std::to_string(i) + "]";
      if (a.kind == "tensor") {
        if (!available_.count(a.value)) return error{where + ": tensor '" + a.value + "' is not available here"};
        args.push_back("static_cast<" + pointer_cast_type(p) + ">(" + var(a.value) + ".data_ptr())");
        continue;
      }
      auto e = tr(a.value);
      if (!e) return error{where + ": " + e.message()};
      if (a.type == "int64")
        args.push_back("static_cast<long long>(ks_int_of(" + *e + ", " + cpp_string(where) + "))");
      else if (a.type == "int32")
        args.push_back("static_cast<int>(ks_in_range(" + *e + ", arg_lo_" + std::to_string(i) + ", 2147483647LL, " +
                       cpp_string(where) + "))");
      else if (a.type == "float32")
        args.push_back("static_cast<float>(ks_dbl(" + *e + "))");
      else
        args.push_back("ks_dbl(" + *e + ")");
      if (a.type == "int32")
        o << "    const int64_t arg_lo_" << i << " = " << (p.is_unsigned ? "0" : "-2147483648LL") << ";  // int32"
          << (p.is_unsigned ? " (unsigned)" : "") << "\n";
    }
    o << "    KS_LAUNCH(" << s.name << ", dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), "
      << "static_cast<unsigned>(grid_z)),\n              dim3(static_cast<unsigned>(block_x), "
      << "static_cast<unsigned>(block_y), static_cast<unsigned>(block_z)), smem, stream";
    for (auto& a : args) o << ",\n              " << a;
    o << ");\n    C10_CUDA_KERNEL_LAUNCH_CHECK();\n  }\n";
    return o.str();
  }

  // A library step: its numbers evaluated, its results taken (export/library_steps.hpp).
  result<std::string> library_step_block(const plan_step& s, size_t si, const std::string& label) {
    std::vector<std::string> a, dargs, operands;
    std::vector<bool> is_tensor;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const plan_arg& arg = s.args[i];
      is_tensor.push_back(arg.kind == "tensor");
      if (arg.kind == "tensor") {
        if (!available_.count(arg.value)) return error{label + ": tensor '" + arg.value + "' is not available here"};
        operands.push_back(arg.value);
        a.push_back(var(arg.value));
        dargs.push_back("ks_targ(" + var(arg.value) + ")");
        continue;
      }
      auto e = tr(arg.value);
      if (!e) return error{label + ": args[" + std::to_string(i) + "]: " + e.message()};
      const std::string where = cpp_string(label + " args[" + std::to_string(i) + "]");
      if (arg.kind == "int") {
        a.push_back("at::Scalar(static_cast<int64_t>(ks_int_of(" + *e + ", " + where + ")))");
        dargs.push_back("ks_iarg(ks_int_of(" + *e + ", " + where + "))");
      } else {
        a.push_back("at::Scalar(ks_dbl(" + *e + "))");
        dargs.push_back("ks_farg(ks_dbl(" + *e + "))");
      }
    }
    resolved_step rs;
    rs.index = si;
    rs.kind = s.kind;
    rs.name = s.name;
    rs.attrs = s.attrs;
    auto c = library_step(label, rs, s.outputs, a, dargs, is_tensor);
    if (!c) return error{c.message()};
    std::string decls;
    const std::set<std::string> declared_before = available_;
    std::string block = library_results(
        label, s.outputs, *c,
        [&](const std::string& n) {
          return target_of(declared_before.count(n) > 0, scratch_.count(n) > 0, kernel_reads_.count(n) > 0);
        },
        operands, decls);
    for (auto& out : s.outputs) available_.insert(out);
    return decls + block;
  }

  const task_spec& task_;
  const launch_plan& plan_;
  const std::vector<kernel_signature>& kernels_;
  std::set<std::string> constants_;
  std::set<std::string> available_;            // tensors declared so far
  const std::set<std::string> kernel_reads_;   // made contiguous when a library step makes them
  std::set<std::string> scratch_;              // the plan's scratch buffers, by name
  std::map<std::string, std::string> shared_;  // a call's text -> the variable holding its value
  std::string pending_;                        // declarations of shared calls not yet written
  std::ostringstream o_;
};

}  // namespace

result<std::string> translate(const std::string& text, const std::set<std::string>& constants,
                              const std::function<std::string(const std::string&)>& tensor,
                              std::map<std::string, std::string>* shared, std::string* declarations) {
  if (!shared || !declarations) return expr_translator(text, constants, tensor).run();
  return expr_translator(text, constants, tensor,
                         [&](std::string call) { return share_call(*shared, *declarations, std::move(call)); })
      .run();
}

result<std::string> general_function(const task_spec& task, const launch_plan& plan,
                                     const std::vector<kernel_signature>& kernels) {
  return general_writer(task, plan, kernels).run();
}

result<std::string> translate_expression(const std::string& text, const std::set<std::string>& constants,
                                         const std::set<std::string>& tensors, std::string* declarations) {
  auto tensor = [&](const std::string& n) { return tensors.count(n) ? var(n) : std::string(); };
  std::map<std::string, std::string> shared;
  return translate(text, constants, tensor, &shared, declarations);
}

}  // namespace ks::export_detail
