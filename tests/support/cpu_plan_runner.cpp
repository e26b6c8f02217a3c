#include "tests/support/cpu_plan_runner.hpp"

#include <deque>
#include <map>
#include <string>

#include "gpu/library_ops.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "plan/plan_validator.hpp"
#include "tests/support/kernel_emulator.hpp"

namespace ks::test {

result<std::vector<at::Tensor>> run_candidate_on_cpu(const task_spec& sized, const candidate& c,
                                                     const std::vector<at::Tensor>& inputs,
                                                     const std::vector<at::Tensor>& params,
                                                     const std::filesystem::path& work_dir) {
  auto ctx = make_plan_context(sized, c.source);
  if (!ctx) return ctx.error();
  auto plan = resolve_plan(c.plan, *ctx);
  if (!plan) return plan.error();
  auto module = emulated_module::build(c.source, work_dir);
  if (!module) return module.error();
  std::map<std::string, at::Tensor> t;
  for (size_t i = 0; i < sized.inputs.size(); ++i) t[sized.inputs[i].name] = inputs[i].clone();
  for (size_t i = 0; i < sized.parameters.size(); ++i) t[sized.parameters[i].name] = params[i].clone();
  auto make = [&](const resolved_buffer& b) {
    const at::ScalarType type = scalar_type(b.dtype).value_or(at::kFloat);
    t[b.name] = b.init == "zeros"          ? at::zeros(b.shape, type)
                : at::isFloatingType(type) ? at::full(b.shape, NAN, type)
                                           : at::full(b.shape, -7, type);
  };
  for (auto& b : plan->outputs) make(b);
  for (auto& b : plan->scratch) make(b);
  for (const resolved_step& s : plan->steps) {
    if (s.kind == "library") {
      std::vector<library_arg> args;
      for (auto& a : s.args) {
        if (a.kind == "tensor")
          args.push_back(library_arg::of(t.at(a.tensor)));
        else if (a.kind == "int")
          args.push_back(library_arg::of_int(a.int_value));
        else
          args.push_back(library_arg::of_float(a.float_value));
      }
      if (auto st = check_library_op(s.name, s.attrs); !st) return error{st.message()};
      auto r = run_library_op_outputs(s.name, args, s.attrs);
      if (!r) return r.error();
      if (s.outputs.size() > r->size()) return error{s.label() + ": more output names than results"};
      for (size_t k = 0; k < s.outputs.size(); ++k) {
        const std::string& out = s.outputs[k];
        const at::Tensor& v = (*r)[k];
        // As the reviewer: a declared buffer must match the result exactly (copy_ would
        // broadcast a wrong shape silently).
        if (t.count(out) && (t[out].sizes() != v.sizes() || t[out].scalar_type() != v.scalar_type()))
          return error{s.label() + ": outputs[" + std::to_string(k) + "] '" + out + "': the op returned " +
                       dtype_name(v.scalar_type()) + " " + c10::str(v.sizes()) + ", the buffer is declared " +
                       dtype_name(t[out].scalar_type()) + " " + c10::str(t[out].sizes())};
        if (t.count(out))
          t[out].copy_(v);
        else
          t[out] = v.contiguous();
      }
      continue;
    }
    std::deque<int64_t> ints;
    std::deque<int32_t> int32s;
    std::deque<float> floats;
    std::deque<void*> ptrs;
    std::vector<void*> args;
    for (auto& a : s.args) {
      if (a.kind == "tensor") {
        ptrs.push_back(t.at(a.tensor).data_ptr());
        args.push_back(&ptrs.back());
      } else if (a.kind == "int" && a.type == "int64") {
        ints.push_back(a.int_value);
        args.push_back(&ints.back());
      } else if (a.kind == "int") {
        int32s.push_back(static_cast<int32_t>(a.int_value));
        args.push_back(&int32s.back());
      } else {
        floats.push_back(static_cast<float>(a.float_value));
        args.push_back(&floats.back());
      }
    }
    if (auto st = (*module)->launch(s.name, s.grid, s.block, s.shared_mem_bytes, args); !st) return error{st.message()};
  }
  std::vector<at::Tensor> outs;
  for (auto& b : plan->outputs) outs.push_back(t.at(b.name));
  return outs;
}

}  // namespace ks::test
