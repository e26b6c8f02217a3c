#include "export/kernelbench_module.hpp"

#include <sstream>

#include "export/source_text.hpp"

namespace ks::export_detail {

namespace {

// A number as get_inputs passed it (task_loader checks the form: "3.14", "2", "True",
// "inf") as a Python expression. Checked again here, character by character, because
// the text lands in a Python file: nothing else than a number may get there.
result<std::string> python_number(const std::string& text) {
  if (text == "inf") return std::string("float(\"inf\")");
  if (text == "-inf") return std::string("-float(\"inf\")");
  if (text == "nan") return std::string("float(\"nan\")");
  if (text == "True" || text == "False") return text;
  bool digit = false;
  for (char c : text) {
    digit = digit || (c >= '0' && c <= '9');
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
      return error{"'" + text + "' is not a number"};
  }
  if (!digit) return error{"'" + text + "' is not a number"};
  return text;
}

// Model's attribute path of a task parameter: its module path less model_attr.
result<std::string> model_path(const kernelbench_spec& kb, const tensor_spec& p) {
  if (p.init.kind != "module" || p.init.attr.empty())
    return error{"parameter '" + p.name + "' is not a module attribute (kind " + p.init.kind +
                 "): a KernelBench ModelNew takes every tensor from the problem's Model"};
  if (kb.model_attr.empty()) return p.init.attr;
  const std::string prefix = kb.model_attr + ".";
  if (p.init.attr.rfind(prefix, 0) != 0)
    return error{"parameter '" + p.name + "' (attr " + p.init.attr + ") is not inside the problem's Model (" +
                 kb.model_attr + ")"};
  return p.init.attr.substr(prefix.size());
}

}  // namespace

bool has_kernelbench_interface(const task_spec& task) { return !task.kernelbench.source.empty(); }

result<std::string> kernelbench_constants(const task_spec& task) {
  const kernelbench_spec& kb = task.kernelbench;
  std::ostringstream p;
  p << "# The KernelBench problem the task was imported from, exactly as imported.\n"
    << "PROBLEM_SOURCE = " << py_block_string(kb.source) << "\n"
    << "# Model.forward's arguments in get_inputs' order: (name, the task input it is, or None\n"
    << "# and the number the kernel was made with).\n"
    << "ARGUMENTS = [\n";
  for (const auto& a : kb.arguments) {
    if (!a.input.empty()) {
      bool known = false;
      for (const auto& in : task.inputs) known = known || in.name == a.input;
      if (!known) return error{"forward argument '" + a.name + "' names no task input ('" + a.input + "')"};
      p << "    (" << py_string(a.name) << ", " << py_string(a.input) << ", None),\n";
      continue;
    }
    auto v = python_number(a.value);
    if (!v) return error{"forward argument '" + a.name + "': " + v.message()};
    p << "    (" << py_string(a.name) << ", None, " << *v << "),\n";
  }
  p << "]\n"
    << "# The task's parameters, after its inputs: (name, attribute path in the problem's Model).\n"
    << "MODEL_PARAMETERS = [\n";
  for (const auto& t : task.parameters) {
    auto path = model_path(kb, t);
    if (!path) return error{path.message()};
    p << "    (" << py_string(t.name) << ", " << py_string(*path) << "),\n";
  }
  p << "]\n"
    << "# The mode the kernel computes Model in (KernelBench runs models as constructed).\n"
    << "TRAINING = " << (task.module_training ? "True" : "False") << "\n";
  return p.str();
}

std::string kernelbench_docstring(const task_spec& task, const std::string& sizes, bool general) {
  std::string name = py_string(task.name);
  name = name.substr(1, name.size() - 2);
  return "\"\"\"The kernel KernelSkill found for KernelBench problem " + name +
         ", with KernelBench's interface.\n\n"
         "    model = ModelNew(*get_init_inputs()).cuda()  # the problem's Model inside: its weights\n"
         "    y = model(*[x.cuda() for x in get_inputs()])  # builds the extension on first use (nvcc)\n\n"
         "ModelNew(*init_inputs) builds the problem's own Model(*init_inputs) before anything else\n"
         "draws random numbers, so under the same seed it holds Model's weights. forward() takes\n"
         "Model.forward's arguments and runs the kernel on the tensors and on the weights, read\n"
         "from that Model at each call; model.reference(...) runs the problem's Model itself.\n"
         "get_inputs and get_init_inputs are the problem's own. Inputs of the shapes of these\n"
         "sizes: " +
         sizes + " (see SIZES) run a launcher specialised at export time; " +
         (general ? "other shapes run one\nthat evaluates the launch plan at run time.\n"
                  : "other shapes raise a RuntimeError.\n") +
         "\"\"\"\n";
}

std::string kernelbench_module_code() {
  // Two blank lines after load_extension(), then export/kernelbench_model_new.py.
  return "\n\n" + std::string(kernelbench_model_new_py());
}

}  // namespace ks::export_detail
