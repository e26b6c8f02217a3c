#include "gpu/module_load_check.hpp"

#include <sstream>
#include <vector>

#include <ATen/core/qualified_name.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/import_source.h>

#include "gpu/bytes_stream.hpp"
#include "gpu/reference_ops.hpp"

namespace ks {

namespace {

// The classes of one code file that define __setstate__ ("class NAME(" at the start of
// a line, "def __setstate__(" inside it).
std::vector<std::string> classes_with_setstate(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line, current;
  while (std::getline(lines, line)) {
    if (line.rfind("class ", 0) == 0) {
      current = line.substr(6, line.find_first_of("(:") - 6);
    } else if (!current.empty() && line.find("def __setstate__(") != std::string::npos &&
               (out.empty() || out.back() != current)) {
      out.push_back(current);
    }
  }
  return out;
}

// "code/__torch__/a/b.py" → "__torch__.a.b".
std::string qualifier_of(const std::string& record) {
  std::string q = record.substr(5, record.size() - 5 - 3);
  for (auto& c : q)
    if (c == '/') c = '.';
  return q;
}

// Calls the inliner could not follow: their code is not in the graph to check.
std::string unfollowed_call(const torch::jit::Block& block) {
  for (const torch::jit::Node* n : block.nodes()) {
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) return n->kind().toQualString();
    for (const torch::jit::Block* sub : n->blocks())
      if (auto c = unfollowed_call(*sub); !c.empty()) return c;
  }
  return "";
}

}  // namespace

status check_module_load_code(std::string_view module_bytes) {
  // Not a zip archive: torch::jit::load cannot read it either and says so in its own
  // words — except a flatbuffer module (magic "PTMF" at byte 4), which it would load,
  // setstate and all, by another path.
  if (module_bytes.size() < 4 || module_bytes.compare(0, 4, "PK\x03\x04") != 0) {
    if (module_bytes.size() >= 8 && module_bytes.compare(4, 4, "PTMF") == 0)
      return error{
          "the module is in the flatbuffer format, whose load-time code cannot be checked; "
          "save it with torch.jit.save (a zip archive)"};
    return {};
  }
  try {
    bytes_istream in(module_bytes);  // not a copy: the weights may be gigabytes
    caffe2::serialize::PyTorchStreamReader reader(&in);
    std::vector<std::string> classes;  // qualified names
    for (const auto& record : reader.getAllRecords()) {
      if (record.rfind("code/", 0) != 0 || record.size() < 9 || record.compare(record.size() - 3, 3, ".py") != 0)
        continue;
      auto [data, size] = reader.getRecord(record);
      const std::string text(static_cast<const char*>(data.get()), size);
      if (text.find("__setstate__") == std::string::npos) continue;
      for (auto& c : classes_with_setstate(text)) classes.push_back(qualifier_of(record) + "." + c);
    }
    if (classes.empty()) return {};

    // Compile the archive's code as torch::jit::load would, without loading its data:
    // the constants are tensors (no code runs to read them), the classes come from code/.
    std::vector<at::IValue> constants;
    if (reader.hasRecord("constants.pkl")) {
      auto table = torch::jit::readArchiveAndTensors("constants", "", "constants/", c10::nullopt, c10::nullopt,
                                                     at::Device(at::kCPU), reader);
      for (const auto& v : table.toTuple()->elements()) constants.push_back(v);
    }
    auto unit = std::make_shared<torch::jit::CompilationUnit>();
    torch::jit::SourceImporter importer(
        unit, &constants,
        [&reader](const std::string& qualifier) -> std::shared_ptr<torch::jit::Source> {
          std::string path = "code/" + qualifier;
          for (auto& c : path)
            if (c == '.') c = '/';
          path += ".py";
          if (!reader.hasRecord(path)) return nullptr;
          auto [data, size] = reader.getRecord(path);
          return std::make_shared<torch::jit::Source>(c10::string_view(static_cast<const char*>(data.get()), size),
                                                      path, 1);
        },
        reader.version());
    for (const auto& name : classes) {
      const std::string where = "class " + name + "'s __setstate__ (run when the module is loaded)";
      auto type = importer.loadType(c10::QualifiedName(name));
      auto cls = type ? type->cast<c10::ClassType>() : nullptr;
      torch::jit::Function* setstate = cls ? cls->findMethod("__setstate__") : nullptr;
      if (!setstate) return error{where + " could not be found in the module's code"};
      auto graph = torch::jit::toGraphFunction(*setstate).graph()->copy();
      torch::jit::Inline(*graph);
      if (auto allowed = check_reference_ops(*graph); !allowed) return error{where + ": " + allowed.message()};
      if (auto call = unfollowed_call(*graph->block()); !call.empty())
        return error{where + " makes a call (" + call +
                     ") whose code cannot be checked; a module may only "
                     "compute when it is loaded"};
    }
    return {};
  } catch (const std::exception& e) {
    std::string what = e.what();
    return error{"the module's load-time code (__setstate__) could not be checked, so it is not loaded: " +
                 what.substr(0, what.find('\n'))};
  }
}

}  // namespace ks
