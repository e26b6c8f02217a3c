#include "coder/task_graph.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/json_codec.hpp"

namespace ks {

int64_t graph_value::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const graph_value* task_graph::value(std::string_view id) const {
  auto it = values.find(std::string(id));
  return it == values.end() ? nullptr : &it->second;
}

namespace {

std::vector<std::string> strings(const nlohmann::json& j, const std::string& field) {
  if (!j.is_array()) throw std::runtime_error(field + ": expected a list");
  std::vector<std::string> out;
  for (auto& e : j) out.push_back(e.get<std::string>());
  return out;
}

}  // namespace

result<task_graph> parse_task_graph(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    task_graph g;
    g.task = j.value("task", "");
    for (auto& in : j.at("inputs")) {
      g.input_values.push_back(in.at("value").get<std::string>());
      g.input_names.push_back(in.at("name").get<std::string>());
    }
    for (auto& [id, v] : j.at("values").items()) {
      graph_value gv;
      gv.id = id;
      gv.type = v.at("type").get<std::string>();
      gv.constant = v.value("constant", false);
      if (v.contains("shape")) gv.shape = v["shape"].get<std::vector<int64_t>>();
      if (v.contains("dtype")) gv.dtype = v["dtype"].get<std::string>();
      if (v.contains("value")) {
        auto& val = v["value"];
        // Floats that JSON has no number for (±inf, NaN) come as "Infinity", "-Infinity"
        // and "NaN" (model/json_codec.hpp); other strings are text.
        auto number = [&](const nlohmann::json& e) {
          if (e.is_boolean()) return e.get<bool>() ? 1.0 : 0.0;
          try {
            return double_from_json(e);
          } catch (const json_decode_error& bad) {
            throw std::runtime_error("values." + id + ".value: " + bad.problem());
          }
        };
        if (val.is_string() && gv.type != "float")
          gv.text = val.get<std::string>();
        else if (val.is_array())
          for (auto& e : val) gv.numbers.push_back(number(e));
        else
          gv.numbers.push_back(number(val));
      }
      g.values[id] = std::move(gv);
    }
    for (auto& n : j.at("nodes")) {
      graph_node gn;
      gn.kind = n.at("kind").get<std::string>();
      gn.inputs = strings(n.at("inputs"), "nodes[].inputs");
      gn.outputs = strings(n.at("outputs"), "nodes[].outputs");
      gn.schema = n.value("schema", "");
      for (auto& id : gn.inputs)
        if (!g.values.count(id))
          return error{"graph: node " + gn.kind + " reads value '" + id + "', which 'values' lacks"};
      g.nodes.push_back(std::move(gn));
    }
    g.outputs = strings(j.at("outputs"), "outputs");
    return g;
  } catch (const std::exception& e) {
    return error{std::string("graph JSON: ") + e.what()};
  }
}

}  // namespace ks
