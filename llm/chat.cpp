#include "llm/chat.hpp"

namespace ks {

const char* to_string(agent_role a) {
  switch (a) {
    case agent_role::generator:
      return "generator";
    case agent_role::repairer:
      return "repairer";
    case agent_role::optimizer:
      return "optimizer";
    case agent_role::diagnoser:
      return "diagnoser";
    case agent_role::planner:
      return "planner";
  }
  return "unknown";
}

result<agent_role> parse_agent_role(const std::string& name) {
  for (auto a :
       {agent_role::generator, agent_role::repairer, agent_role::optimizer, agent_role::diagnoser, agent_role::planner})
    if (name == to_string(a)) return a;
  return ks::error{"unknown agent '" + name + "'; expected one of: generator, repairer, optimizer, diagnoser, planner"};
}

}  // namespace ks
