#include "export/size_launcher.hpp"

#include <array>
#include <set>
#include <sstream>

#include "export/library_steps.hpp"
#include "export/source_text.hpp"

namespace ks::export_detail {

namespace {

std::string scalar_literal(const resolved_arg& a) {
  if (a.kind == "int") {
    if (a.type == "int64") return "static_cast<long long>(" + std::to_string(a.int_value) + "LL)";
    return "static_cast<int>(" + std::to_string(a.int_value) + ")";
  }
  if (a.type == "float32") return "static_cast<float>(" + number(a.float_value) + ")";
  return "static_cast<double>(" + number(a.float_value) + ")";
}

std::string dims3(const std::array<int64_t, 3>& d) {
  return "dim3(" + std::to_string(d[0]) + "u, " + std::to_string(d[1]) + "u, " + std::to_string(d[2]) + "u)";
}

// A kernel step's launch, its numbers fixed.
result<std::string> kernel_step(const resolved_step& s, const std::vector<kernel_signature>& kernels) {
  const kernel_signature* sig = find_kernel(kernels, s.name);
  if (!sig) return error{s.label() + ": the source has no kernel '" + s.name + "'"};
  if (sig->params.size() != s.args.size())
    return error{s.label() + ": " + std::to_string(s.args.size()) + " arguments for " +
                 std::to_string(sig->params.size()) + " parameters"};
  std::vector<std::string> args;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const resolved_arg& a = s.args[i];
    const kernel_param& p = sig->params[i];
    if (a.kind == "tensor") {
      if (!p.is_pointer)
        return error{s.label() + ": args[" + std::to_string(i) + "]: tensor '" + a.tensor +
                     "' passed to the non-pointer parameter '" + p.type + " " + p.name + "'"};
      args.push_back("static_cast<" + pointer_cast_type(p) + ">(" + var(a.tensor) + ".data_ptr())");
    } else {
      args.push_back(scalar_literal(a));
    }
  }
  std::ostringstream o;
  if (s.shared_mem_bytes > 0) {
    // Past 48 KiB a kernel must be opted in; raising the limit to what the step uses
    // is harmless below it. Once per process and step.
    o << "  static const bool smem_" << s.index << " = [] {\n"
      << "    C10_CUDA_CHECK(cudaFuncSetAttribute(" << s.name << ", cudaFuncAttributeMaxDynamicSharedMemorySize, "
      << s.shared_mem_bytes << "));\n"
      << "    return true;\n  }();\n  (void)smem_" << s.index << ";\n";
  }
  o << "  KS_LAUNCH(" << s.name << ", " << dims3(s.grid) << ", " << dims3(s.block) << ", " << s.shared_mem_bytes
    << ", stream";
  for (auto& a : args) o << ",\n            " << a;
  o << ");\n";
  o << "  C10_CUDA_KERNEL_LAUNCH_CHECK();\n";
  return o.str();
}

// A library step, its numbers fixed; `declared` holds the intermediates declared so far,
// `kernel_reads` the plan's tensors_read_by_kernels.
result<std::string> library_step_block(const task_spec& task, const resolved_step& s, const resolved_plan& plan,
                                       const std::set<std::string>& kernel_reads, std::set<std::string>& declared) {
  std::vector<std::string> a, dargs;
  std::vector<bool> is_tensor;
  for (const auto& arg : s.args) {
    is_tensor.push_back(arg.kind == "tensor");
    if (arg.kind == "tensor") {
      a.push_back(var(arg.tensor));
      dargs.push_back("ks_targ(" + var(arg.tensor) + ")");
    } else if (arg.kind == "int") {
      a.push_back("at::Scalar(static_cast<int64_t>(" + std::to_string(arg.int_value) + "LL))");
      dargs.push_back("ks_iarg(" + std::to_string(arg.int_value) + "LL)");
    } else {
      a.push_back("at::Scalar(" + number(arg.float_value) + ")");
      dargs.push_back("ks_farg(" + number(arg.float_value) + ")");
    }
  }
  auto c = library_step(s.label(), s, s.outputs, a, dargs, is_tensor);
  if (!c) return error{c.message()};
  const std::set<std::string> declared_before = declared;
  for (auto& out : s.outputs) {
    const resolved_buffer* b = plan.find_buffer(out);
    if (!(b && b->role != buffer_role::intermediate) && !declared.insert(out).second)
      return error{s.label() + ": intermediate '" + out + "' is produced twice"};
  }
  std::vector<std::string> operands;
  for (const auto& arg : s.args)
    if (arg.kind == "tensor") operands.push_back(arg.tensor);
  std::string decls;
  std::string block = library_results(
      s.label(), s.outputs, *c,
      [&](const std::string& n) {
        const resolved_buffer* b = plan.find_buffer(n);
        return target_of(b && b->role != buffer_role::intermediate, b && b->role == buffer_role::scratch,
                         kernel_reads.count(n) > 0);
      },
      operands, decls);
  return decls + block;
}

}  // namespace

result<std::string> size_function(const task_spec& task, const size_variant& v,
                                  const std::vector<kernel_signature>& kernels, const std::string& fn) {
  std::ostringstream o;
  o << "// The plan resolved at the '" << v.name << "' shapes.\n";
  o << "static std::vector<at::Tensor> " << fn << "(const std::vector<at::Tensor>& in) {\n";
  o << "  const at::TensorOptions options = at::TensorOptions().device(in[0].device());\n";
  o << "  cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n";
  o << "  (void)stream;\n";
  size_t k = 0;
  for (const auto* list : {&task.inputs, &task.parameters})
    for (const auto& t : *list) o << "  const at::Tensor& " << var(t.name) << " = in[" << k++ << "];\n";
  for (const auto* list : {&v.plan.outputs, &v.plan.scratch})
    for (const auto& b : *list) {
      const char* dt = aten_dtype(b.dtype);
      if (!dt) return error{"buffer '" + b.name + "': dtype " + b.dtype + " cannot be exported"};
      o << "  at::Tensor " << var(b.name) << " = at::" << (b.init == "zeros" ? "zeros" : "empty") << "("
        << (b.shape.empty() ? std::string("at::IntArrayRef()") : shape_list(b.shape, "{", "}")) << ", options.dtype("
        << dt << "));  // " << to_string(b.role) << "\n";
    }
  std::set<std::string> declared;  // intermediates already declared
  const std::set<std::string> kernel_reads = tensors_read_by_kernels(v.plan);
  for (const auto& s : v.plan.steps) {
    o << "  // " << s.label() << "\n";
    auto step =
        s.kind == "kernel" ? kernel_step(s, kernels) : library_step_block(task, s, v.plan, kernel_reads, declared);
    if (!step) return error{step.message()};
    o << *step;
  }
  o << "  return {";
  for (size_t i = 0; i < v.plan.outputs.size(); ++i) o << (i ? ", " : "") << var(v.plan.outputs[i].name);
  o << "};\n}\n";
  return o.str();
}

}  // namespace ks::export_detail
