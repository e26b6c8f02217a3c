#include "coder/rules/passes/identities.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "coder/rules/passes/graph_rewrite.hpp"

namespace ks::rules {

namespace {

// Whether `id` is a constant number of `g` equal to `v`.
bool constant_is(const task_graph& g, const std::string& id, double v) {
  const graph_value* c = constant_number(g, id);
  return c && c->numbers[0] == v;
}

// dropout(x, p, train) with train false or p 0.
bool draws_nothing(const task_graph& g, const graph_node& n) {
  if (n.kind != "aten::dropout" && n.kind != "aten::feature_dropout" && n.kind != "aten::alpha_dropout") return false;
  if (n.inputs.size() != 3 || n.outputs.size() != 1) return false;
  return constant_is(g, n.inputs[1], 0) || constant_is(g, n.inputs[2], 0);
}

// Whether `id` is returned: a graph output, or an element of the tuple that is one.
bool returned(const task_graph& g, const std::string& id) {
  if (std::find(g.outputs.begin(), g.outputs.end(), id) != g.outputs.end()) return true;
  for (const graph_node& n : g.nodes)
    if (n.kind == "prim::TupleConstruct" && std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end())
      return true;
  return false;
}

}  // namespace

task_graph drop_identities(const task_graph& graph) {
  task_graph out = graph;
  out.nodes.clear();
  std::map<std::string, std::string> same;  // a dropped op's result -> the value it equals
  for (const graph_node& n : graph.nodes) {
    graph_node m = n;
    for (auto& in : m.inputs)
      if (auto it = same.find(in); it != same.end()) in = it->second;
    if (draws_nothing(graph, m) && !returned(graph, m.outputs[0])) {
      same[m.outputs[0]] = m.inputs[0];
      out.values.erase(m.outputs[0]);
      continue;
    }
    out.nodes.push_back(std::move(m));
  }
  return out;
}

}  // namespace ks::rules
