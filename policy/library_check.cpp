// The skill library's loader, phase 2 (cross-file): ids, references, expression
// names and types; and run(), which reads the directory and runs both phases.
#include "policy/library_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <functional>
#include <memory>
#include <set>

#include "policy/evidence_names.hpp"

namespace ks::library_load {

void library_loader::check_expression(const origin& o, const std::string& key, const policy_expr& e,
                                      const std::map<std::string, value_type>& scope, bool condition,
                                      const std::function<std::string(const std::string&)>& explain_unknown,
                                      value_type* type_out) {
  if (e.empty()) return;  // a parse error was reported already
  const expression_check c = e.check(scope);
  const std::vector<std::string> names = scope_names(scope);
  for (const auto& [name, column] : c.unknown_names) {
    std::string why = explain_unknown ? explain_unknown(name) : "";
    if (why.empty()) why = "unknown name '" + name + "'" + did_you_mean(name, names);
    fail(o, key, "in \"" + e.text() + "\" at column " + std::to_string(column) + ": " + why);
  }
  for (const auto& p : c.problems) fail(o, key, "in \"" + e.text() + "\": " + p);
  if (condition && c.type == value_type::string) {
    fail(o, key, "\"" + e.text() + "\" is a string, not a condition");
  }
  if (type_out && c.type) *type_out = *c.type;
}

void library_loader::check_method_ref(const origin& o, const std::string& key, const std::string& id) {
  if (id.empty() || lib_.find_method(id)) return;
  std::vector<std::string> ids;
  for (const auto& m : lib_.methods) ids.push_back(m.id);
  fail(o, key, "unknown method '" + id + "'" + did_you_mean(id, ids));
}

void library_loader::check_unique_ids() {
  // Ids are unique within each kind; derived fields and predicates share one
  // namespace (both are names in expressions) and may not shadow evidence.
  struct first_def {
    std::string kind;
    const origin* o;
  };
  const auto where = [&](const origin& o) {
    auto it = o.fields.find("id");
    return files_[o.file].reader->where(it != o.fields.end() ? it->second : o.entry);
  };
  const auto check = [&](const std::string& kind, const std::vector<std::string>& ids,
                         const std::vector<origin>& origins, std::map<std::string, first_def>& seen) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].empty()) continue;
      auto [it, inserted] = seen.emplace(ids[i], first_def{kind, &origins[i]});
      if (!inserted) {
        std::string first = where(*it->second.o);
        first = first.substr(0, first.size() - 2);  // drop ": "
        fail(origins[i], "id",
             "duplicate " + kind + " id '" + ids[i] + "' (" +
                 (it->second.kind == kind ? "first defined" : "already a " + it->second.kind) + " at " + first + ")");
      }
    }
  };
  const auto ids_of = [](const auto& v) {
    std::vector<std::string> ids;
    for (const auto& x : v) ids.push_back(x.id);
    return ids;
  };
  std::map<std::string, first_def> names, bottlenecks, methods, cases, vetoes;
  check("derived field", ids_of(lib_.derived), derived_o_, names);
  check("predicate", ids_of(lib_.predicates), predicate_o_, names);
  check("bottleneck", ids_of(lib_.bottlenecks), bottleneck_o_, bottlenecks);
  check("method", ids_of(lib_.methods), method_o_, methods);
  check("decision case", ids_of(lib_.decisions), case_o_, cases);
  check("veto", ids_of(lib_.vetoes), veto_o_, vetoes);
  const auto shadow = [&](const std::vector<std::string>& ids, const std::vector<origin>& o) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (const evidence_name* e = find_evidence_name(ids[i])) {
        fail(o[i], "id",
             "'" + ids[i] + "' is already a " + to_string(e->kind) + " name (docs/metrics.md); choose another id");
      }
    }
  };
  shadow(ids_of(lib_.derived), derived_o_);
  shadow(ids_of(lib_.predicates), predicate_o_);
}

void library_loader::check_all() {
  check_unique_ids();

  std::map<std::string, value_type> scope;
  for (const auto& e : evidence_names()) {
    scope[e.name] = e.type == evidence_type::string ? value_type::string : value_type::number;
  }
  std::set<std::string> derived_ids, predicate_ids;
  for (const auto& d : lib_.derived) derived_ids.insert(d.id);
  for (const auto& p : lib_.predicates) predicate_ids.insert(p.id);

  // Derived fields: evidence and earlier derived fields only.
  for (size_t i = 0; i < lib_.derived.size(); ++i) {
    const auto& d = lib_.derived[i];
    value_type t = value_type::number;
    check_expression(
        derived_o_[i], "expr", d.expr, scope, false,
        [&](const std::string& name) -> std::string {
          if (name == d.id) return "a derived field cannot use itself ('" + name + "')";
          if (predicate_ids.count(name))
            return "'" + name + "' is a predicate; derived fields may use only evidence and earlier derived fields";
          if (derived_ids.count(name))
            return "derived field '" + name + "' is defined after '" + d.id +
                   "' (a derived field may use only earlier ones)";
          return "";
        },
        &t);
    if (!d.id.empty() && !scope.count(d.id)) scope[d.id] = t;
  }
  // Predicates: anything but a cycle.
  for (const auto& p : lib_.predicates) {
    if (!p.id.empty() && !scope.count(p.id)) scope[p.id] = value_type::boolean;
  }
  for (size_t i = 0; i < lib_.predicates.size(); ++i) {
    check_expression(predicate_o_[i], "expr", lib_.predicates[i].expr, scope, true, {});
  }
  // Cycles among predicates, and evaluation order (dependencies first, otherwise
  // file order).
  {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < lib_.predicates.size(); ++i) index.emplace(lib_.predicates[i].id, i);
    std::vector<int> state(lib_.predicates.size(), 0);  // 0 new, 1 visiting, 2 done
    std::vector<size_t> order;
    std::vector<std::string> stack;
    std::set<size_t> reported;
    std::function<void(size_t)> visit = [&](size_t i) {
      if (state[i] == 2) return;
      if (state[i] == 1) {
        auto from = std::find(stack.begin(), stack.end(), lib_.predicates[i].id);
        std::string cycle;
        for (auto it = from; it != stack.end(); ++it) cycle += *it + " → ";
        cycle += lib_.predicates[i].id;
        if (reported.insert(i).second) {
          fail(predicate_o_[i], "expr", "predicates form a cycle: " + cycle);
        }
        return;
      }
      state[i] = 1;
      stack.push_back(lib_.predicates[i].id);
      for (const auto& name : lib_.predicates[i].expr.identifiers()) {
        auto it = index.find(name);
        if (it != index.end()) visit(it->second);
      }
      stack.pop_back();
      state[i] = 2;
      order.push_back(i);
    };
    for (size_t i = 0; i < lib_.predicates.size(); ++i) visit(i);
    std::vector<predicate_def> sorted;
    std::vector<origin> sorted_o;
    for (size_t i : order) {
      sorted.push_back(lib_.predicates[i]);
      sorted_o.push_back(predicate_o_[i]);
    }
    lib_.predicates = std::move(sorted);
    predicate_o_ = std::move(sorted_o);
  }

  const std::vector<std::string> all_names = scope_names(scope);

  // Bottlenecks: unique priorities, conditions, evidence names.
  std::map<int, size_t> priorities;
  for (size_t i = 0; i < lib_.bottlenecks.size(); ++i) {
    const auto& b = lib_.bottlenecks[i];
    if (bottleneck_o_[i].fields.count("priority")) {
      auto [it, inserted] = priorities.emplace(b.priority, i);
      if (!inserted) {
        const auto& other = lib_.bottlenecks[it->second];
        fail(bottleneck_o_[i], "priority",
             "priority " + std::to_string(b.priority) + " is already used by bottleneck '" + other.id + "' (" +
                 other.where.to_string() + "); priorities must be unique");
      }
    }
    check_expression(bottleneck_o_[i], "when", b.when, scope, true, {});
    for (size_t k = 0; k < b.evidence.size(); ++k) {
      if (!scope.count(b.evidence[k])) {
        fail(bottleneck_o_[i], "evidence[" + std::to_string(k) + "]",
             "unknown name '" + b.evidence[k] + "'" + did_you_mean(b.evidence[k], all_names));
      }
    }
  }

  // Methods: preconditions.
  for (size_t i = 0; i < lib_.methods.size(); ++i) {
    if (lib_.methods[i].requirement) {
      check_expression(method_o_[i], "requires", *lib_.methods[i].requirement, scope, true, {});
    }
  }

  // Decision cases: references and conditions.
  std::vector<std::string> bottleneck_ids = {"any"};
  for (const auto& b : lib_.bottlenecks) bottleneck_ids.push_back(b.id);
  for (size_t i = 0; i < lib_.decisions.size(); ++i) {
    const auto& c = lib_.decisions[i];
    const origin& o = case_o_[i];
    if (!c.bottleneck.empty() &&
        std::find(bottleneck_ids.begin(), bottleneck_ids.end(), c.bottleneck) == bottleneck_ids.end()) {
      fail(o, "bottleneck", "unknown bottleneck '" + c.bottleneck + "'" + did_you_mean(c.bottleneck, bottleneck_ids));
    }
    if (c.when) check_expression(o, "when", *c.when, scope, true, {});
    std::set<std::string> allowed;
    for (size_t k = 0; k < c.allow.size(); ++k) {
      const std::string key = "allow[" + std::to_string(k) + "].method";
      check_method_ref(o, key, c.allow[k].method);
      if (!allowed.insert(c.allow[k].method).second)
        fail(o, key, "method '" + c.allow[k].method + "' is allowed twice in this case");
    }
    for (size_t k = 0; k < c.forbid.size(); ++k) {
      const std::string key = "forbid[" + std::to_string(k) + "].method";
      check_method_ref(o, key, c.forbid[k].method);
      if (allowed.count(c.forbid[k].method))
        fail(o, key, "method '" + c.forbid[k].method + "' is both allowed and forbidden in this case");
    }
  }

  // Global vetoes.
  for (size_t i = 0; i < lib_.vetoes.size(); ++i) {
    const auto& v = lib_.vetoes[i];
    for (size_t k = 0; k < v.methods.size(); ++k) {
      check_method_ref(veto_o_[i], "methods[" + std::to_string(k) + "]", v.methods[k]);
    }
    check_expression(veto_o_[i], "when", v.when, scope, true, {});
  }

  std::stable_sort(lib_.bottlenecks.begin(), lib_.bottlenecks.end(),
                   [](const bottleneck_def& a, const bottleneck_def& b) { return a.priority > b.priority; });
}

result<skill_library> library_loader::run() {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    return ks::error{dir_.string() + ": not a directory (the skill library is a directory of *.yaml files)"};
  }
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) paths.push_back(entry.path());
  }
  if (ec) return ks::error{dir_.string() + ": " + ec.message()};
  std::sort(paths.begin(), paths.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  if (paths.empty()) return ks::error{dir_.string() + ": no *.yaml files (the skill library is empty)"};

  for (const auto& p : paths) {
    loaded_file f;
    f.source = (dir_ / p.filename()).lexically_normal().string();
    f.reader = std::make_unique<yaml_reader>(f.source);
    try {
      f.root = YAML::LoadFile(p.string());
    } catch (const YAML::ParserException& e) {
      const std::string pos =
          e.mark.is_null() ? "" : ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
      global_errors_.push_back(f.source + pos + ": YAML syntax error: " + e.msg);
      continue;
    } catch (const YAML::Exception& e) {
      global_errors_.push_back(f.source + ": cannot read: " + e.msg);
      continue;
    }
    lib_.files.push_back(f.source);
    files_.push_back(std::move(f));
  }
  for (size_t i = 0; i < files_.size(); ++i) read_file(i);
  if (!library_origin_ && global_errors_.empty()) {
    global_errors_.push_back(dir_.string() +
                             ": no file has a 'library' entry (exactly one file must have "
                             "`library: {name: NAME, version: N}`)");
  }
  check_all();

  std::vector<std::string> all = global_errors_;
  for (const auto& f : files_) {
    for (const auto& e : f.reader->errors()) all.push_back(e);
  }
  if (!all.empty()) {
    std::string msg;
    for (size_t i = 0; i < all.size(); ++i) msg += (i ? "\n" : "") + all[i];
    return ks::error{msg};
  }
  return std::move(lib_);
}

}  // namespace ks::library_load
