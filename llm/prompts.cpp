#include "llm/prompts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "llm/module_code.hpp"
#include "llm/prompt_budget.hpp"
#include "plan/launch_plan_yaml.hpp"

namespace ks {

namespace {

// ---------------------------------------------------------------------------
// Formatting helpers.

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string cut(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  return s.substr(0, limit) + "\n… (" + std::to_string(s.size() - limit) + " more characters)";
}

std::string one_line(std::string s, size_t limit) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > limit) s = s.substr(0, limit) + "…";
  return s;
}

std::string fenced(const std::string& lang, const std::string& body) {
  std::string s = "```" + lang + "\n" + body;
  if (s.empty() || s.back() != '\n') s += '\n';
  return s + "```\n";
}

std::string short_id(const std::string& id) { return id.size() > 12 ? id.substr(0, 12) : id; }

std::string distribution_text(const distribution_spec& d) {
  if (d.kind == "normal") return "normal(mean " + num(d.mean) + ", std " + num(d.std) + ")";
  if (d.kind == "uniform") return "uniform[" + num(d.low) + ", " + num(d.high) + ")";
  if (d.kind == "randint") return "random integers in [" + num(d.low) + ", " + num(d.high) + ")";
  if (d.kind == "constant") return "constant " + num(d.value);
  if (d.kind == "kaiming_uniform") return "kaiming_uniform (uniform ±1/sqrt(fan_in))";
  if (d.kind == "module") return "the module's `" + d.attr + "`";
  if (d.kind == "program") return "made by the task's input program";
  return d.kind;
}

std::string tensor_line(const tensor_spec& t) {
  return "- `" + t.name + "`: " + t.dtype + " " + shape_text(t.shape) + ", " + distribution_text(t.init) + "\n";
}

// The text of 1-based `line` of `source`, or "" when out of range.
std::string source_line(const std::string& source, int line) {
  if (line < 1) return {};
  std::istringstream in(source);
  std::string text;
  for (int i = 1; std::getline(in, text); ++i)
    if (i == line) return text;
  return {};
}

std::string plan_yaml(const launch_plan& plan) { return to_yaml(plan); }

std::string candidate_blocks(const candidate& cand) {
  std::string s = fenced("cuda", cand.source);
  s += "\nIts launch plan:\n\n" + fenced("yaml", plan_yaml(cand.plan));
  if (!cand.compile_options.empty()) {
    s += "\nNVRTC options:";
    for (const auto& o : cand.compile_options) s += " `" + o + "`";
    s += "\n";
  }
  return s;
}

// ---------------------------------------------------------------------------
// The system prompts.

const std::string& sandbox_rules() {
  static const std::string text =
      R"(You are an expert CUDA performance engineer. You write and optimise GPU kernels that compute exactly what a PyTorch reference program computes, faster than PyTorch eager.

## How your kernels run
- Your source is CUDA C++ *device code* compiled by NVRTC for a recent NVIDIA data-center GPU (sm_90 class unless told otherwise). There is no host code: no main(), no `<<<...>>>` launches, no cudaMalloc, no PyTorch extension, no host headers (<vector>, <iostream>, <torch/...>). CUDA's device headers are available (<cuda_fp16.h>, <cuda_bf16.h>, <cuda/std/cstdint>, ...). NVRTC defines no int64_t by itself: write `long long`, or include <cuda/std/cstdint>.
- What runs is described by a launch plan (YAML) that you write next to the source: which kernels run in which order, with grid, block and dynamic shared memory as expressions over the input shapes, plus optional library steps (ATen ops such as aten::matmul through LibTorch) for the parts you do not replace.
- Kernels that the plan launches must be `extern "C" __global__` (a template needs an extern "C" wrapper kernel).
- Tensors are contiguous (row-major) and at least 256-byte aligned, inputs and plan buffers alike: vector accesses (float4) at a tensor's base pointer are safe; at an offset into it, only when the offset keeps 16-byte alignment.

## What counts as correct
- Every element of every output is compared with the reference, in several trials with fresh inputs drawn from more than one distribution, with the task's tolerance (|out - ref| <= atol + rtol * |ref|). NaN never passes.
- Outputs are filled with garbage before each run: write every element of every output.
- Inputs must stay unchanged: take them through const pointers.
- Two runs must give identical results: avoid order-dependent floating-point atomics unless the tolerance clearly absorbs them.
- The plan must work for every shape the task lists, not only the largest: size grids from the shapes, guard bounds, handle tails.
- No shortcuts: outputs must be computed from the inputs on every run (no caching across runs, no skipped work, no hard-coded results). Suspiciously large speedups are flagged and checked again.
)";
  return text;
}

const std::string& diagnosis_reply_format() {
  static const std::string text = R"(## Reply format
Your reply is read by a program. Think it through, then end your reply with exactly one ```json block of this form, and nothing after it:

```json
{"diagnosis": "the root cause in one paragraph: which line(s), what goes wrong and why",
 "actions": ["one concrete change per entry, precise enough to apply without guessing", "..."]}
```
)";
  return text;
}

std::string system_prompt(agent_role role) {
  std::string s = sandbox_rules();
  s += "\n## Your role\n";
  switch (role) {
    case agent_role::generator:
      s += "You are the generator: you write a first kernel (a seed) for a new task. "
           "Correctness comes first; within that, make it reasonably fast: coalesced "
           "accesses, enough parallelism to fill the GPU, no needless passes over memory, "
           "fused elementwise work.\n";
      break;
    case agent_role::optimizer:
      s += "You are the optimizer: you apply one named optimisation method to a kernel "
           "that is already correct, and it must stay correct. Change what the method "
           "requires and nothing else; a change the method does not call for makes the "
           "measured effect impossible to attribute.\n";
      break;
    case agent_role::repairer:
      s += "You are the repairer: you fix a kernel that failed review, following the "
           "diagnosis you are given. Make the smallest change that fixes the failure; "
           "do not optimise, rename or restructure anything else.\n";
      break;
    case agent_role::diagnoser:
      s += "You are the diagnoser: you find the root cause of a failed review and say "
           "precisely what to change. You do not write the fixed kernel.\n";
      break;
    case agent_role::planner:
      s += "You are the planner: you choose the next optimisation for a correct kernel.\n";
      break;
  }
  s += "\n";
  s += role == agent_role::diagnoser ? diagnosis_reply_format() : candidate_reply_format();
  return s;
}

// Directions that make a task's seeds differ.
const char* seed_direction(uint32_t index) {
  static const char* directions[] = {
      "the simplest correct design: the clearest mapping of threads to output elements "
      "(or one block per row for reductions and normalisations), coalesced accesses, "
      "bounds checks. Correctness first.",
      "fused and vectorised: as few kernels as possible, 128-bit (float4) loads and "
      "stores along the contiguous dimension with a scalar tail, several elements per "
      "thread.",
      "library-assisted where it pays: library steps (aten::matmul, aten::conv2d, ...) "
      "for GEMM- or convolution-shaped parts with everything around them fused into "
      "custom kernels; for tasks without such parts, warp-level primitives (one warp "
      "per row, __shfl_xor_sync reductions).",
      "latency- and occupancy-oriented: a grid-stride loop with the grid sized to a few "
      "waves of the GPU, independent work per thread for instruction-level parallelism, "
      "__launch_bounds__ matching the block size.",
  };
  return directions[index % 4];
}

// Checklists per failure kind: what an expert looks at first.
const char* failure_checklist(review_status status) {
  switch (status) {
    case review_status::compile_error:
      return "Usual causes under NVRTC: a host-only header or function; int64_t/size_t "
             "without <cuda/std/cstdint>; a missing `extern \"C\"` or a kernel name that "
             "differs from the plan's; a template used without instantiation; a __device__ "
             "function used before its declaration; half/bfloat16 arithmetic without "
             "<cuda_fp16.h>/<cuda_bf16.h>; a typo.";
    case review_status::plan_error:
      return "Usual causes: the plan's arguments do not match the kernel's parameters in "
             "number, order or exact type ({int64: ...} for long long, {int32: ...} for "
             "int); a kernel name the source does not define as extern \"C\"; a tensor "
             "name that does not exist; a buffer read before any step writes it; too many "
             "threads per block or too much dynamic shared memory; an output never "
             "written or outputs in the wrong order or shape.";
    case review_status::incorrect:
      return "Usual causes: an index or stride error (row vs column, a wrong dimension); "
             "a missing bounds check or tail; a reduction whose accumulator is not "
             "initialised or not combined across all threads; a missing __syncthreads() "
             "between shared-memory writes and reads; an output element never written "
             "(outputs start as garbage); a formula that differs from the reference (exact "
             "erf GELU vs the tanh approximation, biased vs unbiased variance, eps inside "
             "or outside the sqrt); a broadcast done wrong; fast-math intrinsics or "
             "float16 intermediates beyond the tolerance; results that depend on timing "
             "(atomics, races).";
    case review_status::crashed:
      return "Usual causes: an out-of-bounds access (a missing bounds check, an index "
             "computed in 32 bits that overflows, a grid larger than the data); a "
             "misaligned vector access (float4 at an offset that is not a multiple of 4 "
             "elements); more shared memory used than the plan allocates; reading a "
             "pointer argument bound to the wrong tensor.";
    case review_status::timed_out:
      return "Usual causes: a loop whose index never advances (a grid-stride loop with a "
             "zero or wrong stride, an int counter that overflows), a __syncthreads() "
             "inside divergent code (deadlock), a spin-wait on a flag, or a launch so "
             "large that it does the work many times over.";
    case review_status::internal_error:
      return "The reviewer itself failed; the kernel may be fine. Check the message.";
    case review_status::ok:
      return "";
  }
  return "";
}

std::string method_knowledge_section(const method_def* method, const std::string& chosen) {
  if (!method) return "## Method: `" + chosen + "`\nNamed only: what it means for this kernel is for you to judge.\n";
  return render_method(*method);
}

std::string features_section(const code_features& f) {
  std::string s = "## Code features of the current kernel\n";
  if (!f.structure_class.empty()) s += "Structure: " + f.structure_class + "\n";
  if (f.values.empty()) return s + "(none extracted)\n";
  for (const auto& [name, value] : f.values) s += "- " + name + " = " + num(value) + "\n";
  return s;
}

std::string plan_section(const optimization_plan& plan) {
  std::string s = "## The planner's decision\n";
  if (!plan.bottleneck_class.empty()) s += "Bottleneck class: " + plan.bottleneck_class + "\n";
  s += "Chosen method: `" + plan.chosen + "`\n";
  if (!plan.rationale.empty()) s += "Why: " + plan.rationale + "\n";
  for (const auto& c : plan.ranked) {
    if (c.method != plan.chosen) continue;
    if (!c.fired_rules.empty()) {
      s += "Rules that chose it:";
      for (const auto& r : c.fired_rules) s += " " + r;
      s += "\n";
    }
    if (!c.evidence.empty()) {
      s += "Evidence:";
      bool first = true;
      for (const auto& [k, v] : c.evidence) {
        s += (first ? " " : ", ") + k + " = " + num(v);
        first = false;
      }
      s += "\n";
    }
  }
  std::vector<std::string> others;
  for (const auto& c : plan.ranked)
    if (c.method != plan.chosen) others.push_back(c.method);
  if (!others.empty()) {
    s += "Other allowed methods, for later rounds (do not apply them now):";
    for (const auto& m : others) s += " " + m;
    s += "\n";
  }
  if (!plan.vetoed.empty()) {
    s += "Forbidden for this kernel (do not use them, not even partly):\n";
    for (const auto& v : plan.vetoed) s += "- `" + v.method + "`: " + v.reason + "\n";
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------

const std::string& candidate_reply_format() {
  static const std::string text = R"(## Reply format
Your reply is read by a program. Send, in this order:
1. optionally, at most a few sentences on what you did and why;
2. one ```cuda block with the complete CUDA source — every kernel and helper, never a diff or an excerpt;
3. one ```yaml block with the complete launch plan.
Nothing after the yaml block, and no other code blocks.
)";
  return text;
}

const std::string& launch_plan_guide() {
  static const std::string text = R"(## Launch plan format (YAML)
```yaml
constants:            # name → expression over input shapes and other constants
  BLOCK: 256
  N: x.numel
outputs:              # the tensors the plan returns, in the reference's output order
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
scratch:              # optional temporaries; init: none (default) or zeros
  - {name: partial, shape: [ceil_div(N, BLOCK)], dtype: float32, init: zeros}
steps:                # run in order, on one stream
  - kernel: relu_f32              # an extern "C" __global__ function of the source
    grid: [ceil_div(N, BLOCK)]    # 1-3 expressions (x, y, z); missing ones are 1
    block: [BLOCK]                # 1-3 expressions; threads per block <= 1024, a multiple of 32
    shared_mem: 0                 # bytes of dynamic (extern __shared__) shared memory
    args: [x, y, {int64: N}]      # one entry per kernel parameter, in order
  - library: aten::matmul         # an ATen op, run through LibTorch
    args: [a, b]
    outputs: [prod]               # a new intermediate name, or a declared output/scratch buffer
    attrs: {}                     # the op's keyword arguments, as strings
```
- Arguments: a bare name is a tensor (an input, a parameter, an output, scratch or an intermediate). Numbers are typed and the type must match the C++ parameter exactly: `{int32: E}` for int, `{int64: E}` for long long / int64_t / size_t, `{float32: E}` for float, `{float64: E}` for double. A bare number is an error.
- A pointer parameter takes a tensor of its element type (const float* and float4* take float32, __half* float16, __nv_bfloat16* bfloat16). A non-const pointer parameter counts as a write: declare read-only parameters const. A buffer read before any step writes it is an error unless it has init: zeros.
- Expressions: integer arithmetic `+ - * / %` (`/` is floor division on integers), `ceil_div(a, b)`, `round_up(a, b)`, `min`, `max`, `abs`, `floor`, `ceil`, `sqrt`; `T.shape[i]` (negative i counts from the end), `T.numel`, `T.ndim`; constants by name. No quotes needed: `[ceil_div(N, 256)]` is fine.
- dtypes: float32, float16, bfloat16, float64, int32, int64, bool.
- Library ops with shape inference: aten::matmul, mm, bmm, addmm, linear, conv2d (attrs stride, padding, dilation, groups), add, sub, mul, div, softmax and log_softmax (attr dim), gelu (attr approximate), relu, sigmoid, tanh, exp, log, neg, abs, sqrt, rsqrt, silu, sin, cos. Prefer your own kernels; use a library step where a hand-written kernel cannot compete (large GEMMs, convolutions) and fuse the work around it.
- Dynamic shared memory may exceed 48 KB, up to 232448 bytes per block.

### Example: y = torch.relu(x) for a 2-D float32 x
```cuda
extern "C" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}
```
```yaml
constants:
  BLOCK: 256
  N: x.numel
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - kernel: relu_f32
    grid: [ceil_div(N, BLOCK)]
    block: [BLOCK]
    args: [x, y, {int64: N}]
```
)";
  return text;
}

namespace {

// How much of the reference's source a prompt shows.
enum class source_cut { full, no_comments, half, quarter };

std::string shown_source(const std::string& source, source_cut cut) {
  switch (cut) {
    case source_cut::full:
      return source;
    case source_cut::no_comments:
      return strip_python_comments(source);
    case source_cut::half: {
      const std::string s = strip_python_comments(source);
      return cut_middle(s, s.size() / 2, "#");
    }
    case source_cut::quarter: {
      const std::string s = strip_python_comments(source);
      return cut_middle(s, s.size() / 4, "#");
    }
  }
  return source;
}

std::string task_text(const task_spec& task, source_cut cut) {
  std::string s = "## Task `" + task.name + "`\n";
  if (!task.description.empty()) s += task.description + "\n";
  const kernelbench_spec& kb = task.kernelbench;
  if (!kb.source.empty()) {
    // A KernelBench problem: its own Python, which says the constants, strides,
    // padding and order of ops that a one-line description cannot.
    s += "\nReference: the KernelBench problem this task was imported from. The kernels replace "
         "`Model.forward`";
    if (!kb.model_attr.empty()) s += " (the module runs it as its attribute `" + kb.model_attr + "`)";
    s += "; the shapes to support are the inputs listed below, which may differ from the "
         "problem's own sizes.\n\n";
    s += fenced("python", shown_source(kb.source, cut));
    std::vector<std::string> constants;
    for (const auto& a : kb.arguments)
      if (a.input.empty() && !a.value.empty()) constants.push_back("`" + a.name + "` = " + a.value);
    if (!constants.empty()) {
      s += "forward's arguments that get_inputs() passes as numbers (constants of the kernel):";
      for (size_t i = 0; i < constants.size(); ++i) s += (i ? ", " : " ") + constants[i];
      s += ".\n";
    }
  } else if (!task.torchscript.empty()) {
    s += "\nReference (TorchScript; `forward` takes the inputs, then the parameters):\n\n";
    s += fenced("python", shown_source(task.torchscript, cut));
  } else if (!task.module_bytes.empty() || !task.module_path.empty()) {
    // A saved module: its code as TorchScript printed it into the archive.
    auto code =
        task.module_bytes.empty() ? result<std::vector<module_code_file>>(error{""}) : module_code(task.module_bytes);
    if (code && !code->empty()) {
      s += "\nReference: a saved TorchScript module";
      if (!task.module_path.empty()) s += " (`" + task.module_path + "`)";
      s += "; its code as TorchScript printed it. Its forward takes the inputs only; parameters are "
           "the module's own tensors, passed to the plan as the tensors listed below.\n\n";
      for (const auto& f : *code) s += fenced("python", "# " + f.path + "\n" + shown_source(f.text, cut));
    } else {
      s += "\nReference: a saved TorchScript module";
      if (!task.module_path.empty()) s += " (`" + task.module_path + "`)";
      s += "; its source is not shown here, the description says what it computes. Its "
           "forward takes the inputs only; parameters are part of the module.\n";
    }
  }
  if (!task.input_program.empty()) {
    s += "\nThe inputs are made by this TorchScript program (use its values' ranges, not only their shapes):\n\n";
    s += fenced("python", shown_source(task.input_program, cut));
  }
  s += "\nInputs, in forward's order (use these names in the plan):\n";
  for (const auto& t : task.inputs) s += tensor_line(t);
  if (!task.parameters.empty()) {
    s += "Parameters, passed after the inputs (also tensors of the plan):\n";
    for (const auto& t : task.parameters) s += tensor_line(t);
  }
  s += "Tolerance: |out - ref| <= " + num(task.tolerance.atol) + " + " + num(task.tolerance.rtol) +
       " * |ref|, element by element.\n";
  if (!task.sizes.empty()) {
    s += "The plan must also work at these sizes:";
    for (const auto& [size, shapes] : task.sizes) {
      s += " " + size + " (";
      bool first = true;
      for (const auto& [tensor, shape] : shapes) {
        s += (first ? "" : ", ") + tensor + " " + shape_text(shape);
        first = false;
      }
      s += ")";
    }
    s += ".\n";
  }
  return s;
}

// The task with its reference at four lengths: whole, without comments and
// docstrings, and cut in the middle to a half and a quarter.
prompt_section task_section(const task_spec& task) {
  return make_section("reference",
                      {{task_text(task, source_cut::full), ""},
                       {task_text(task, source_cut::no_comments), "the reference's comments"},
                       {task_text(task, source_cut::half), "half of the reference's source"},
                       {task_text(task, source_cut::quarter), "three quarters of the reference's source"}});
}

}  // namespace

std::string render_task(const task_spec& task) { return task_text(task, source_cut::full); }

namespace {

std::string method_text(const method_def& m, bool with_example) {
  std::string s = "## Method to apply: " + m.name + " (`" + m.id + "`";
  if (!m.category.empty()) s += ", " + m.category;
  s += ")\n";
  if (!m.rationale.empty()) s += "Rationale: " + m.rationale + "\n";
  if (!m.preconditions.empty()) {
    s += "Preconditions (check each against this kernel):\n";
    for (const auto& p : m.preconditions) s += "- " + p + "\n";
  }
  if (!m.expected_effect.empty()) {
    s += "Expected effect on the next profile:";
    bool first = true;
    for (const auto& [metric, dir] : m.expected_effect) {
      s += (first ? " " : ", ") + metric + " " + dir;
      first = false;
    }
    s += "\n";
  }
  if (!m.forbidden_patterns.empty()) {
    s += "Forbidden patterns (a kernel with any of these is wrong or will be rejected):\n";
    for (const auto& p : m.forbidden_patterns) s += "- " + p + "\n";
  }
  if (with_example && !m.example.empty())
    s += "Example of the method (illustration, not this task):\n\n" + fenced("cuda", m.example);
  return s;
}

// How much of a review's profile a prompt shows.
enum class profile_cut { all, digest, none };

std::string review_text(const review_result& r, const task_spec& task, const candidate& cand,
                        const prompt_limits& limits, profile_cut profile, size_t max_diagnostics, size_t max_log_chars,
                        const std::vector<std::string>& key_metrics = {}) {
  std::string s = "## Review of candidate `" + short_id(cand.id.empty() ? r.candidate_id : cand.id) +
                  "`: " + to_string(r.status) + "\n";
  if (!r.device.empty()) s += "Device: " + r.device + "\n";
  if (!r.message.empty()) s += cut(r.message, max_log_chars) + "\n";

  switch (r.status) {
    case review_status::compile_error: {
      if (!r.diagnostics.empty()) {
        s += "\nCompiler diagnostics (line numbers refer to the source above):\n";
        size_t shown = 0;
        for (const auto& d : r.diagnostics) {
          if (shown++ == max_diagnostics) {
            s += "… " + std::to_string(r.diagnostics.size() - max_diagnostics) + " more\n";
            break;
          }
          s += "- line " + std::to_string(d.line);
          if (d.column > 0) s += ", column " + std::to_string(d.column);
          s += ": " + (d.severity.empty() ? std::string("error") : d.severity) + ": " + d.message + "\n";
          const std::string text = source_line(cand.source, d.line);
          if (!text.empty()) s += "      " + std::to_string(d.line) + " | " + text + "\n";
        }
      } else if (!r.compile_log.empty()) {
        s += "\nCompiler log:\n\n" + fenced("text", cut(r.compile_log, max_log_chars));
      }
      break;
    }
    case review_status::incorrect: {
      s += "\nOutputs differ from the reference: " + std::to_string(r.trials_passed) + " of " +
           std::to_string(r.trials_run) + " trials passed; max abs error " + num(r.max_abs_error) + ", max rel error " +
           num(r.max_rel_error) + " (tolerance atol " + num(task.tolerance.atol) + ", rtol " +
           num(task.tolerance.rtol) + ").\n";
      break;
    }
    case review_status::ok: {
      if (r.speedup > 0)
        s += "Speedup over PyTorch eager: " + num(r.speedup) + "x (candidate median " +
             num(r.candidate_time.median_ms) + " ms, reference median " + num(r.reference_time.median_ms) + " ms).\n";
      break;
    }
    default:
      break;
  }
  if (!r.flags.empty()) {
    s += "Flags:";
    for (const auto& f : r.flags) s += " " + f;
    s += "\n";
  }
  if (r.status == review_status::ok && !r.profile.values.empty() && profile != profile_cut::none) {
    s += "\nProfile";
    if (r.profile.kernel_launches > 0)
      s += " (" + std::to_string(r.profile.kernel_launches) + " kernel launch" +
           (r.profile.kernel_launches == 1 ? "" : "es") + " per run)";
    if (profile == profile_cut::digest) s += ", the metrics the planner's decision rests on";
    s += ":\n";
    size_t shown = 0;
    for (const auto& [name, value] : r.profile.values) {
      if (profile == profile_cut::digest &&
          std::find(key_metrics.begin(), key_metrics.end(), name) == key_metrics.end())
        continue;
      s += "- " + name + " = " + num(value) + "\n";
      ++shown;
    }
    if (shown < r.profile.values.size())
      s += "(" + std::to_string(r.profile.values.size() - shown) + " other metrics left out)\n";
  }
  if (!r.resources.empty() && profile != profile_cut::none) {
    s += "\nCompiled resources per kernel:\n";
    for (const auto& k : r.resources)
      s += "- " + k.kernel + ": " + std::to_string(k.registers) + " registers/thread, " +
           std::to_string(k.static_shared_bytes) + " B static shared memory, " + std::to_string(k.local_bytes) +
           " B local memory/thread" + (k.local_bytes > 0 ? " (spills or local arrays)" : "") + "\n";
  }
  (void)limits;
  return s;
}

// `keep`: the most recent entries shown; with_digest: the per-method outcomes.
std::string history_text(const std::vector<trajectory_entry>& history, const prompt_limits& limits, size_t keep,
                         bool with_digest) {
  if (history.empty()) return "## History of this task\nNothing yet: this is the first attempt.\n";
  std::string s = "## History of this task";
  const size_t skip = history.size() > keep ? history.size() - keep : 0;
  if (keep > 0) {
    s += " (oldest first";
    if (skip) s += "; the last " + std::to_string(keep) + " of " + std::to_string(history.size()) + " events";
    s += ")\n";
  } else {
    s += ": " + std::to_string(history.size()) + " events, summed up\n";
  }
  for (size_t i = skip; i < history.size(); ++i) {
    const auto& e = history[i];
    s += "- round " + std::to_string(e.round) + " " + e.kind;
    if (!e.method.empty()) s += " `" + e.method + "`";
    if (!e.candidate_id.empty()) s += " [" + short_id(e.candidate_id) + "]";
    const bool has_status = e.kind != "plan" && e.kind != "diagnose" && e.kind != "note";
    if (has_status) s += std::string(": ") + to_string(e.status);
    if (e.speedup > 0) s += ", " + num(e.speedup) + "x";
    if (!e.summary.empty()) s += " — " + one_line(e.summary, limits.max_summary_chars);
    s += "\n";
  }
  if (!with_digest) return s;
  // Per method, what it gave: the short-term memory an expert keeps in mind.
  std::map<std::string, std::vector<std::string>> outcomes;
  for (const auto& e : history) {
    if (e.method.empty() || e.kind == "plan" || e.kind == "diagnose" || e.kind == "note") continue;
    std::string o = std::string(to_string(e.status));
    if (e.status == review_status::ok && e.speedup > 0) o += " " + num(e.speedup) + "x";
    outcomes[e.method].push_back(o + " (round " + std::to_string(e.round) + ")");
  }
  if (!outcomes.empty()) {
    s += "Methods and repairs already tried, with their outcomes — do not repeat what failed:\n";
    for (const auto& [method, list] : outcomes) {
      s += "- `" + method + "`:";
      for (size_t i = 0; i < list.size(); ++i) s += (i ? ", " : " ") + list[i];
      s += "\n";
    }
  }
  return s;
}

// The history, shortened oldest first: the last max_history events, the last 8, the
// last 3, the per-method digest alone, nothing.
prompt_section history_section(const std::vector<trajectory_entry>& history, const prompt_limits& limits) {
  const size_t n = std::min(history.size(), limits.max_history);
  return make_section(
      "history", {{history_text(history, limits, limits.max_history, true) + "\n", ""},
                  {history_text(history, limits, std::min<size_t>(n, 8), true) + "\n", "the history's older events"},
                  {history_text(history, limits, std::min<size_t>(n, 3), true) + "\n", "the history's older events"},
                  {history_text(history, limits, 0, true) + "\n", "the history's events (its digest is kept)"},
                  {"", "the history"}});
}

// The launch-plan guide: whole, without its worked example, its format rules only,
// or (where the current kernel's plan is an example) nothing.
prompt_section guide_section(bool may_drop) {
  const std::string& full = launch_plan_guide();
  const size_t ex = full.find("\n### Example");
  const std::string no_example = ex == std::string::npos ? full : full.substr(0, ex + 1);
  std::string rules;
  std::istringstream in(no_example);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("- Library ops", 0) != 0 && line.rfind("- Dynamic shared memory", 0) != 0 &&
        line.rfind("- dtypes", 0) != 0)
      rules += line + "\n";
  std::vector<std::pair<std::string, std::string>> levels = {
      {full + "\n", ""},
      {no_example + "\n", "the launch-plan guide's worked example"},
      {rules + "\n", "the launch-plan guide's list of library ops"}};
  if (may_drop) levels.push_back({"", "the launch-plan guide (the current kernel's plan shows the format)"});
  return make_section("guide", std::move(levels));
}

prompt_section fixed(std::string text) { return make_section("", {{std::move(text), ""}}); }

// Each level of `s` followed by a blank line.
prompt_section spaced(prompt_section s) {
  for (auto& t : s.levels)
    if (!t.empty()) t += "\n";
  return s;
}

// The characters the user message may take: the budget less the system prompt.
chat_request finish(chat_request req, std::vector<prompt_section> sections, const std::vector<std::string>& order,
                    const prompt_limits& limits) {
  auto a = assemble_prompt(std::move(sections), order, limits.max_prompt_chars, req.system.size());
  std::string u = std::move(a.text);
  if (!a.cuts.empty()) {
    u += "\n(Shortened to fit the model's context: left out ";
    for (size_t i = 0; i < a.cuts.size(); ++i) u += (i ? "; " : "") + a.cuts[i];
    u += ".)\n";
  }
  req.messages.push_back({"user", std::move(u)});
  return req;
}

}  // namespace

std::string render_method(const method_def& m) { return method_text(m, true); }

std::string render_review(const review_result& r, const task_spec& task, const candidate& cand,
                          const prompt_limits& limits) {
  return review_text(r, task, cand, limits, profile_cut::all, limits.max_diagnostics, limits.max_log_chars);
}

std::string render_history(const std::vector<trajectory_entry>& history, const prompt_limits& limits) {
  return history_text(history, limits, limits.max_history, true);
}

const std::vector<std::string>& truncation_order(agent_role role) {
  static const std::vector<std::string> generator = {"guide", "reference"};
  static const std::vector<std::string> optimizer = {"history", "method", "guide", "features", "review", "reference"};
  static const std::vector<std::string> diagnoser = {"history", "review", "reference"};
  static const std::vector<std::string> repairer = {"failed_repairs", "guide", "review", "reference"};
  static const std::vector<std::string> none;
  switch (role) {
    case agent_role::generator:
      return generator;
    case agent_role::optimizer:
      return optimizer;
    case agent_role::diagnoser:
      return diagnoser;
    case agent_role::repairer:
      return repairer;
    case agent_role::planner:
      return none;
  }
  return none;
}

// ---------------------------------------------------------------------------

chat_request generator_prompt(const task_spec& task, const generator_options& options, const prompt_limits& limits) {
  chat_request req;
  req.agent = agent_role::generator;
  req.task = task.name;
  req.system = system_prompt(agent_role::generator);
  std::vector<prompt_section> parts;
  parts.push_back(fixed("# Write a kernel for task `" + task.name + "`\n\n"));
  parts.push_back(spaced(task_section(task)));
  parts.push_back(guide_section(false));
  std::string u = "## This seed\n";
  const uint32_t seeds = std::max<uint32_t>(options.seeds, 1);
  u += "Seed " + std::to_string(options.seed_index + 1) + " of " + std::to_string(seeds) + ". Design direction: " +
       (options.strategy_hint.empty() ? std::string(seed_direction(options.seed_index)) : options.strategy_hint) +
       "\n\n";
  u += "## What to do\n"
       "1. Read the reference and work out exactly what it computes, including dtypes, "
       "broadcasting, reduction dimensions and the output shapes and their order.\n"
       "2. Write the CUDA source and the launch plan that compute the same outputs for "
       "every shape listed above.\n"
       "3. Check each plan argument against the kernel's parameter list (count, order, "
       "exact scalar types) and that every output is fully written.\n\n";
  u += "Reply with the complete source in one ```cuda block and the complete launch "
       "plan in one ```yaml block.\n";
  parts.push_back(fixed(std::move(u)));
  return finish(std::move(req), std::move(parts), truncation_order(agent_role::generator), limits);
}

chat_request optimizer_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                              const code_features& features, const optimization_plan& plan, const method_def* method,
                              const std::vector<trajectory_entry>& history, const prompt_limits& limits) {
  chat_request req;
  req.agent = agent_role::optimizer;
  req.task = task.name;
  req.system = system_prompt(agent_role::optimizer);
  const std::string name = method ? method->name + " (`" + plan.chosen + "`)" : "`" + plan.chosen + "`";
  std::vector<prompt_section> parts;
  parts.push_back(fixed("# Apply " + name + " to kernel `" + short_id(cand.id) + "` of task `" + task.name +
                        "` (round " + std::to_string(cand.round) + ")\n\n"));
  parts.push_back(spaced(task_section(task)));
  parts.push_back(fixed("## Current kernel (correct)\n\n" + candidate_blocks(cand) + "\n"));
  // The profile digest: the metrics the planner's chosen method rests on.
  std::vector<std::string> key_metrics;
  for (const auto& c : plan.ranked)
    if (c.method == plan.chosen)
      for (const auto& [k, v] : c.evidence) key_metrics.push_back(k);
  parts.push_back(make_section(
      "review",
      {{review_text(review, task, cand, limits, profile_cut::all, limits.max_diagnostics, limits.max_log_chars) + "\n",
        ""},
       {review_text(review, task, cand, limits, profile_cut::digest, limits.max_diagnostics, limits.max_log_chars,
                    key_metrics) +
            "\n",
        "the profile metrics the planner's decision does not rest on"},
       {review_text(review, task, cand, limits, profile_cut::none, limits.max_diagnostics, limits.max_log_chars) + "\n",
        "the profile and the compiled resources"}}));
  parts.push_back(make_section("features", {{features_section(features) + "\n", ""}, {"", "the code features"}}));
  parts.push_back(fixed(plan_section(plan) + "\n"));
  if (method)
    parts.push_back(make_section("method", {{method_text(*method, true) + "\n", ""},
                                            {method_text(*method, false) + "\n", "the method's example"}}));
  else
    parts.push_back(fixed(method_knowledge_section(nullptr, plan.chosen) + "\n"));
  parts.push_back(history_section(history, limits));
  parts.push_back(guide_section(true));
  std::string u = "## What to do\n";
  if (method)
    u += "1. Check the method's preconditions against this kernel. If one does not hold, do "
         "not force the method: say so in one sentence and make the closest change that "
         "does hold.\n"
         "2. Apply `" +
         plan.chosen +
         "` and only it; keep everything the method does not "
         "concern as it is. Avoid every forbidden pattern above, and every method the "
         "planner forbade.\n";
  else
    // The method named only (no knowledge recorded, or long-term memory off): what it
    // means and when it applies is the model's own judgement.
    u += "1. Decide from the review and the code features whether `" + plan.chosen +
         "` can help this kernel. If it cannot, say so in one sentence and make the closest "
         "change that can.\n"
         "2. Apply `" +
         plan.chosen +
         "` and only it; keep everything the method does not "
         "concern as it is, and avoid every method the planner forbade.\n";
  u += "3. Keep the kernel correct for every shape of the task, with the same outputs in "
       "the same order; update the plan to match every changed kernel signature, grid, "
       "block or shared-memory size.\n";
  u += method ? "4. Aim for the expected effect on the profile; the next review measures it.\n\n"
              : "4. The next review measures the effect.\n\n";
  u += "Reply with the complete new source in one ```cuda block and the complete launch "
       "plan in one ```yaml block.\n";
  parts.push_back(fixed(std::move(u)));
  return finish(std::move(req), std::move(parts), truncation_order(agent_role::optimizer), limits);
}

namespace {

// A failing kernel's review: whole, or with 5 diagnostics and 1000 characters of log.
prompt_section failure_review_section(const review_result& review, const task_spec& task, const candidate& cand,
                                      const prompt_limits& limits) {
  return make_section(
      "review",
      {{review_text(review, task, cand, limits, profile_cut::all, limits.max_diagnostics, limits.max_log_chars) + "\n",
        ""},
       {review_text(review, task, cand, limits, profile_cut::all, std::min<size_t>(limits.max_diagnostics, 5),
                    std::min<size_t>(limits.max_log_chars, 1000)) +
            "\n",
        "compiler diagnostics after the first 5, and most of the log"}});
}

}  // namespace

chat_request diagnoser_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                              const std::vector<trajectory_entry>& history, const prompt_limits& limits) {
  chat_request req;
  req.agent = agent_role::diagnoser;
  req.task = task.name;
  req.system = system_prompt(agent_role::diagnoser);
  std::vector<prompt_section> parts;
  parts.push_back(fixed("# Diagnose why kernel `" + short_id(cand.id) + "` of task `" + task.name +
                        "` failed review (" + to_string(review.status) + ")\n\n"));
  parts.push_back(spaced(task_section(task)));
  parts.push_back(fixed("## Failing kernel\n\n" + candidate_blocks(cand) + "\n"));
  parts.push_back(failure_review_section(review, task, cand, limits));
  if (const char* hints = failure_checklist(review.status); *hints)
    parts.push_back(fixed("## Where to look\n" + std::string(hints) + "\n\n"));
  parts.push_back(history_section(history, limits));
  parts.push_back(
      fixed("## What to do\n"
            "1. Find the root cause: the line(s) responsible and the mechanism, not the symptom.\n"
            "2. List the changes that fix it, smallest first, each concrete (which line, what "
            "it becomes). Do not suggest a fix that the history shows has already failed.\n"
            "3. Do not propose optimisations: only what makes the kernel compile, fit its "
            "plan and match the reference.\n\n"
            "End with the ```json block.\n"));
  return finish(std::move(req), std::move(parts), truncation_order(agent_role::diagnoser), limits);
}

namespace {

std::string failed_repairs_text(const std::vector<trajectory_entry>& failed, const prompt_limits& limits, size_t keep) {
  if (failed.empty() || keep == 0) return "";
  std::string u = "## Earlier repairs that failed (do not repeat them)\n";
  const size_t skip = failed.size() > keep ? failed.size() - keep : 0;
  if (skip) u += "(the last " + std::to_string(keep) + " of " + std::to_string(failed.size()) + ")\n";
  for (size_t i = skip; i < failed.size(); ++i) {
    const auto& e = failed[i];
    u += "- round " + std::to_string(e.round);
    if (!e.method.empty()) u += " `" + e.method + "`";
    if (!e.candidate_id.empty()) u += " [" + short_id(e.candidate_id) + "]";
    u += std::string(": ") + to_string(e.status);
    if (!e.summary.empty()) u += " — " + one_line(e.summary, limits.max_summary_chars);
    u += "\n";
  }
  return u + "\n";
}

}  // namespace

chat_request repairer_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                             const repair_plan& diagnosis, const std::vector<trajectory_entry>& failed_repairs,
                             const prompt_limits& limits) {
  chat_request req;
  req.agent = agent_role::repairer;
  req.task = task.name;
  req.system = system_prompt(agent_role::repairer);
  std::vector<prompt_section> parts;
  parts.push_back(fixed("# Repair kernel `" + short_id(cand.id) + "` of task `" + task.name + "` (" +
                        to_string(review.status) + ")\n\n"));
  parts.push_back(spaced(task_section(task)));
  parts.push_back(fixed("## Failing kernel\n\n" + candidate_blocks(cand) + "\n"));
  parts.push_back(failure_review_section(review, task, cand, limits));
  std::string d = "## Diagnosis\n";
  d += (diagnosis.diagnosis.empty() ? std::string("(none given)") : diagnosis.diagnosis) + "\n";
  if (!diagnosis.actions.empty()) {
    d += "Actions:\n";
    for (size_t i = 0; i < diagnosis.actions.size(); ++i)
      d += std::to_string(i + 1) + ". " + diagnosis.actions[i] + "\n";
  }
  parts.push_back(fixed(d + "\n"));
  parts.push_back(
      make_section("failed_repairs", {{failed_repairs_text(failed_repairs, limits, limits.max_history), ""},
                                      {failed_repairs_text(failed_repairs, limits, 2), "the older failed repairs"},
                                      {"", "the failed repairs"}}));
  if (const char* hints = failure_checklist(review.status); *hints)
    parts.push_back(fixed("## Where to look\n" + std::string(hints) + "\n\n"));
  parts.push_back(guide_section(true));
  parts.push_back(
      fixed("## What to do\n"
            "1. Apply the diagnosis' actions; if one is wrong, fix the root cause it points at "
            "instead and say so in one sentence.\n"
            "2. Change as little as possible: same kernels, names and design, unless the fix "
            "needs more.\n"
            "3. Keep the plan consistent with the source (argument count, order and types).\n\n"
            "Reply with the complete repaired source in one ```cuda block and the complete "
            "launch plan in one ```yaml block.\n"));
  return finish(std::move(req), std::move(parts), truncation_order(agent_role::repairer), limits);
}

}  // namespace ks
