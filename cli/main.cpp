// kernelskill: the daemon and command line of KernelSkill. See --help.

#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "protocol/protocol.hpp"

namespace {

using namespace ks::cli;

// After parsing, runs the subcommand it was made for if that one was given (its exit
// status), else returns nullopt.
using command_action = std::function<std::optional<int>()>;

// What the options write into. Some fields are shared by several subcommands
// (config_path, size, print, skills_dir).
struct option_values {
  global_options g;
  std::string config_path;
  std::string listen;
  bool print = false;
  std::vector<std::string> task_paths;
  std::string size;
  std::string plan_path, source_path, plan_task;
  std::string skills_dir = KS_DEFAULT_SKILLS_DIR, memory_path, method, evidence, bottleneck;
  std::string lower_task_path, lower_out = "lowered", lower_worker;
  uint32_t lower_seeds = 4;
  ks::process_limits lower_limits;
  import_request imp;
  export_request exp;
  bench_request bench;
  std::string trajectory_task, trajectory_memory = "ks-memory";
  std::string store_memory;
};

// run, serve and check: the commands of an experiment config.
command_action add_experiment_commands(CLI::App& app, option_values& o) {
  auto& config_path = o.config_path;
  auto& listen = o.listen;
  auto& print = o.print;
  auto* run = app.add_subcommand("run",
                                 "Run an experiment: optimise every task the config names, on the GPUs it names\n"
                                 "(local workers and gpus.remote). Progress goes to stderr, one line per step;\n"
                                 "the summary table to stdout; per-task kernels, reviews and trajectories to\n"
                                 "output.dir. Exit status: 0 every task got a correct kernel, 5 some did not,\n"
                                 "3 no GPU, 1 a bad config or task file.");
  run->add_option("config", config_path, "Experiment config (YAML; see examples/experiment.yaml)")
      ->required()
      ->check(CLI::ExistingFile);

  auto* serve = app.add_subcommand("serve",
                                   "Run the daemon: a persistent task queue with an HTTP/JSON API and a dashboard\n"
                                   "on serve.listen (default 127.0.0.1:8470). Tasks are optimised like `run` does,\n"
                                   "budgets.tasks_in_flight at a time; kill it any time: acknowledged tasks are in\n"
                                   "the store and running ones resume from their last completed round. Submit with\n"
                                   "`kernelskill submit`; see docs/daemon.md for the API.");
  serve->add_option("--config", config_path, "Config (YAML): gpus, budgets, coder, memory, serve")
      ->check(CLI::ExistingFile);
  serve->add_option("--listen", listen, "HOST:PORT to serve on (overrides serve.listen; port 0: any)");

  auto* check = app.add_subcommand("check", "Validate a config and every task file it names, without touching a GPU");
  check->add_option("config", config_path, "Experiment config (YAML)")->required();
  check->add_flag("--print", print, "Print the effective config (defaults filled in)");
  return [&o, run, serve, check]() -> std::optional<int> {
    if (*run) return run_experiment(o.config_path, o.g);
    if (*serve) return ks::cli::serve(o.config_path, o.listen, o.g);
    if (*check) return check_config(o.config_path, o.print, o.g);
    return std::nullopt;
  };
}

// task check and plan check.
command_action add_file_checks(CLI::App& app, option_values& o) {
  auto& task_paths = o.task_paths;
  auto& size = o.size;
  auto& print = o.print;
  auto& plan_path = o.plan_path;
  auto& source_path = o.source_path;
  auto& plan_task = o.plan_task;
  auto* task = app.add_subcommand("task", "Work with task files (a PyTorch reference + its inputs)");
  task->require_subcommand(1);
  auto* task_check = task->add_subcommand("check", "Validate task files; --print shows each one normalised");
  task_check->add_option("tasks", task_paths, "Task files (YAML)")->required();
  task_check->add_option("--size", size, "Apply the task's named size (e.g. cpu) first");
  task_check->add_flag("--print", print, "Print the normalised task YAML");

  auto* plan = app.add_subcommand("plan", "Work with launch plans (how a candidate's kernels run)");
  plan->require_subcommand(1);
  auto* plan_check = plan->add_subcommand("check",
                                          "Validate a launch plan against a kernel source and a task's tensor shapes,\n"
                                          "and print the concrete grid, block, shared memory, buffers and arguments");
  plan_check->add_option("plan", plan_path, "Launch plan (YAML; see docs/launch-plan.md)")->required();
  plan_check->add_option("--task", plan_task, "The task whose inputs the plan runs on")->required();
  plan_check->add_option("--source", source_path, "The CUDA source the plan launches")->required();
  plan_check->add_option("--size", size, "Use the task's named size (e.g. cpu)");
  return [&o, task_check, plan_check]() -> std::optional<int> {
    if (*task_check) return check_tasks(o.task_paths, o.size, o.print);
    if (*plan_check) return check_plan(o.plan_path, o.plan_task, o.source_path, o.size);
    return std::nullopt;
  };
}

command_action add_devices(CLI::App& app, option_values& o) {
  auto& config_path = o.config_path;
  auto* devices = app.add_subcommand("devices", "Start or contact the configured GPU workers and list their GPUs");
  devices->add_option("--config", config_path, "Experiment config naming gpus (default: the local machine's GPUs)");
  return [&o, devices]() -> std::optional<int> {
    if (*devices) return list_devices(o.config_path, o.g);
    return std::nullopt;
  };
}

// skills list, show, check, explain, install and stats.
command_action add_skills(CLI::App& app, option_values& o) {
  auto& skills_dir = o.skills_dir;
  auto& memory_path = o.memory_path;
  auto& method = o.method;
  auto& evidence = o.evidence;
  auto& bottleneck = o.bottleneck;
  auto* skills = app.add_subcommand("skills",
                                    "The skill library (long-term memory): methods, decision table, vetoes,\n"
                                    "and the experience recorded in a memory store");
  skills->require_subcommand(1);
  auto add_dir = [&](CLI::App* sub) {
    sub->add_option("--skills", skills_dir, "The skill library directory (default: the repo's skills/)");
  };
  auto* skills_list_cmd = skills->add_subcommand("list", "List methods and bottleneck classes");
  add_dir(skills_list_cmd);
  auto* skills_show_cmd =
      skills->add_subcommand("show",
                             "Show one method: rationale, preconditions, expected effect, example, sources,\n"
                             "and the cases and vetoes that mention it");
  skills_show_cmd->add_option("method", method, "Method id (see skills list)")->required();
  add_dir(skills_show_cmd);
  auto* skills_check_cmd =
      skills->add_subcommand("check",
                             "Validate the library (schema, references, expressions) and check that every\n"
                             "decision case fires on its own example");
  add_dir(skills_check_cmd);
  auto* skills_explain_cmd =
      skills->add_subcommand("explain",
                             "Run the decision policy on evidence (JSON: structure_class, metrics, features,\n"
                             "task {atol, rtol, dtype}, round, template, methods: the coder's legal moves)\n"
                             "and print the auditable decision trace");
  skills_explain_cmd->add_option("evidence", evidence, "Evidence file (JSON)")->required();
  skills_explain_cmd->add_option("--memory", memory_path,
                                 "A memory store whose experience of (bottleneck class, template, method)\n"
                                 "weighs in each move's expected gain; the trace says when it moved the choice");
  add_dir(skills_explain_cmd);
  auto* skills_install_cmd =
      skills->add_subcommand("install", "Install (or upgrade) the library into a memory store; refuses a downgrade");
  skills_install_cmd->add_option("--memory", memory_path, "The memory store directory")->required();
  add_dir(skills_install_cmd);
  auto* skills_stats_cmd =
      skills->add_subcommand("stats", "What each applied method achieved, per bottleneck class, from a memory store");
  skills_stats_cmd->add_option("--memory", memory_path, "The memory store directory")->required();
  skills_stats_cmd->add_option("--bottleneck", bottleneck, "Only this bottleneck class");
  return [&o, skills_list_cmd, skills_show_cmd, skills_check_cmd, skills_explain_cmd, skills_install_cmd,
          skills_stats_cmd]() -> std::optional<int> {
    if (*skills_list_cmd) return skills_list(o.skills_dir);
    if (*skills_show_cmd) return skills_show(o.skills_dir, o.method);
    if (*skills_check_cmd) return skills_check(o.skills_dir);
    if (*skills_explain_cmd) return skills_explain(o.skills_dir, o.evidence, o.memory_path);
    if (*skills_install_cmd) return skills_install(o.skills_dir, o.memory_path);
    if (*skills_stats_cmd) return skills_stats(o.memory_path, o.bottleneck);
    return std::nullopt;
  };
}

command_action add_lower(CLI::App& app, option_values& o) {
  auto& lower_task_path = o.lower_task_path;
  auto& lower_out = o.lower_out;
  auto& lower_worker = o.lower_worker;
  auto& lower_seeds = o.lower_seeds;
  auto& size = o.size;
  auto& skills_dir = o.skills_dir;
  auto& lower_limits = o.lower_limits;
  auto* lower = app.add_subcommand("lower",
                                   "Write what the built-in rules coder makes of a task: DIR/seed-K.cu and\n"
                                   "DIR/seed-K.yaml per seed (review one with kernelskill-gpu --review)");
  lower->add_option("task", lower_task_path, "Task file (YAML)")->required()->check(CLI::ExistingFile);
  lower->add_option("--out", lower_out, "Output directory (default: lowered)");
  lower->add_option("--seeds", lower_seeds, "How many seeds (default 4)");
  lower->add_option("--size", size, "Check the plans at the task's named size (e.g. cpu)");
  lower->add_option("--gpu-worker", lower_worker,
                    "kernelskill-gpu, which exports the graph (default: next to this program)");
  lower->add_option("--skills", skills_dir, "The skill library directory (default: the repo's skills/)");
  lower->add_option("--memory-mb", lower_limits.memory_mb,
                    "Memory the graph export may allocate, MiB (default 16384): it holds the task's\n"
                    "module file once, and its largest tensor while the module loads");
  lower->add_option("--cpu-seconds", lower_limits.cpu_seconds, "CPU time of the graph export (default 120)");
  lower->add_option("--wall-seconds", lower_limits.wall_seconds, "Wall-clock time of the graph export (default 300)");
  return [&o, lower]() -> std::optional<int> {
    if (*lower)
      return lower_task(o.lower_task_path, o.lower_out, o.lower_seeds, o.skills_dir, o.lower_worker, o.size,
                        o.lower_limits);
    return std::nullopt;
  };
}

command_action add_import(CLI::App& app, option_values& o) {
  auto& imp = o.imp;
  auto* import_cmd = app.add_subcommand("import", "Turn problem files written for other tools into task files");
  import_cmd->require_subcommand(1);
  auto* import_kb =
      import_cmd->add_subcommand("kernelbench",
                                 "KernelBench problem files (class Model, get_inputs, get_init_inputs) as tasks:\n"
                                 "OUT/[DIR/]NAME.yaml and NAME.pt each, with the module's weights as KernelBench's\n"
                                 "evaluator makes them (seed 42), training mode, and inputs drawn as get_inputs draws\n"
                                 "them. Each problem runs in its own bounded child with PYTHON and PyTorch; one that\n"
                                 "fails is reported with its reason and the rest are still imported. Writes\n"
                                 "OUT/import-report.json. Exit status 0: all imported, 1: some failed. See\n"
                                 "docs/kernelbench.md.");
  import_kb->add_option("paths", imp.paths, "Problem files (.py) or directories searched for them")->required();
  import_kb->add_option("--out", imp.out_dir, "Output directory (default: tasks)");
  import_kb->add_option("--python", imp.python, "Python with torch to run problems with (default: python3)");
  import_kb->add_option("--seed", imp.seed,
                        "The seed set before get_init_inputs and Model (default 42, as KernelBench)");
  import_kb->add_option("--jobs", imp.jobs, "Problems imported at once (default 2)");
  import_kb->add_option("--trace-gib", imp.trace_gib, "Inputs a traced import may make on the CPU, GiB (default 4)");
  import_kb->add_option("--cpu-seconds", imp.cpu_seconds, "CPU time per problem (default 300)");
  import_kb->add_option("--memory-mb", imp.memory_mb, "Memory per problem, MiB (default 16384)");
  import_kb->add_option("--wall-seconds", imp.wall_seconds, "Wall-clock time per problem (default 600)");
  return [&o, import_kb]() -> std::optional<int> {
    if (*import_kb) return import_kernelbench(o.imp);
    return std::nullopt;
  };
}

command_action add_export(CLI::App& app, option_values& o) {
  auto& exp = o.exp;
  auto* export_cmd = app.add_subcommand("export",
                                        "Write a finished kernel as a PyTorch module (class ModelNew, built with\n"
                                        "torch.utils.cpp_extension.load) from a run's output or a kernel + plan");
  export_cmd->add_option("--task", exp.task_path, "Task file (YAML)")->required()->check(CLI::ExistingFile);
  export_cmd->add_option("--run-dir", exp.run_dir, "A kernelskill run output: output.dir/tasks/NAME/ or output.dir");
  export_cmd->add_option("--kernel", exp.kernel_path, "The kernel source (instead of --run-dir)");
  export_cmd->add_option("--plan", exp.plan_path, "Its launch plan (instead of --run-dir)");
  export_cmd->add_option("--compile-option", exp.compile_options, "An NVRTC option the kernel was reviewed with");
  export_cmd->add_option("--out", exp.out_path, "The Python file to write (default model_new.py; - for stdout)");
  return [&o, export_cmd]() -> std::optional<int> {
    if (*export_cmd) return export_model(o.exp);
    return std::nullopt;
  };
}

command_action add_bench(CLI::App& app, option_values& o) {
  auto& bench = o.bench;
  auto* bench_cmd =
      app.add_subcommand("bench",
                         "KernelBench problems end to end, with KernelBench's and the paper's metrics:\n"
                         "(a) import the problem files as `import kernelbench` does; (b) optimise them as `run`\n"
                         "does, once per ablation variant, each with its own store; (c) export each task's best\n"
                         "kernel as `export` does; (d) measure the problem's Model in PyTorch eager, torch.compile\n"
                         "and ours side by side (one process per GPU, alternated, L2 flushed, medians), ours\n"
                         "checked against the Model at 1e-4 and at KernelBench's older 1e-2. Writes\n"
                         "DIR/summary.md, summary.json and SVG pictures: correctness, geometric-mean speedup\n"
                         "over eager and torch.compile, fast_p (p = 0, 1, 1.5, 2), mean speedup by round, per\n"
                         "level and variant. Resumable: run it again with the same --out after an interruption\n"
                         "and the finished steps are kept. Needs a Python with PyTorch (--python) and a GPU for\n"
                         "the run and the measurement. Exit status 0: all measured; 1: an error or an\n"
                         "incomplete measurement; 3: no GPU (what could be done is kept). See docs/bench.md.");
  bench_cmd->add_option("problems", bench.paths, "KernelBench problem files (.py) or directories of them")->required();
  bench_cmd->add_option("--out", bench.out_dir, "The output directory (its state: run again to resume)")->required();
  bench_cmd
      ->add_option("--config", bench.config_path,
                   "An experiment config (YAML) for the run: gpus, budgets, coder, review (its tasks,\n"
                   "memory and output are the bench's own); the flags below override it")
      ->check(CLI::ExistingFile);
  bench_cmd->add_option("--seeds", bench.seeds, "Seed kernels per task (budgets.seeds; default 4)");
  bench_cmd->add_option("--rounds", bench.rounds, "Optimisation rounds per seed (budgets.rounds; default 15)");
  bench_cmd
      ->add_option("--coder", bench.coder,
                   "rules (built in, the default), llm, or hybrid (the templates first, the model where\n"
                   "they stop); llm and hybrid need --config with coder.llm (docs/llm.md)")
      ->check(CLI::IsMember({"rules", "llm", "hybrid"}));
  bench_cmd->add_option("--ablation", bench.ablation,
                        "Variants to run, comma-separated: full, no-ltm (no skill library or experience,\n"
                        "in the planner and the llm coder's prompts), no-stm (no trajectory), no-ltm-stm\n"
                        "(default: the config's ablation section, full without one)");
  bench_cmd->add_option("--python", bench.python,
                        "Python with torch for the import and the measurement (default python3)");
  bench_cmd
      ->add_option("--device", bench.devices,
                   "GPUs to use, comma-separated (the run's gpus.local and one measuring process each;\n"
                   "default: the config's GPUs for the run, every GPU PyTorch sees for the measurement)")
      ->delimiter(',');
  bench_cmd
      ->add_option("--reps", bench.reps, "Timed calls of each of eager, torch.compile and ours (median; default 30)")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--trials", bench.trials, "Correctness trials on fresh inputs (default 3)")
      ->check(CLI::PositiveNumber);
  bench_cmd
      ->add_option("--compile-timeout", bench.compile_timeout,
                   "Seconds torch.compile's first call may take per problem (default 120)")
      ->check(CLI::PositiveNumber);
  bench_cmd
      ->add_option("--build-timeout", bench.build_timeout,
                   "Seconds one exported model's extension build may take (default 600); a model that\n"
                   "does not build in time is a failed row with the reason, and the rest goes on")
      ->check(CLI::PositiveNumber);
  bench_cmd
      ->add_option("--problem-timeout", bench.problem_timeout,
                   "Seconds one problem's measurement may take, and one torch.compile warm-up (default\n"
                   "900); a problem past it is ended and recorded as a failed row with the phase it was in")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--run-name", bench.run_name,
                        "The run's name in the per-problem rows, results-VARIANT.csv (default: \"DATE\n"
                        "kernelskill bench OUT\")");
  bench_cmd->add_option("--commit", bench.commit,
                        "The commit those rows name (default: the one kernelskill was built from; where\n"
                        "that is unknown, e.g. a copy of the tree without .git, they say \"unknown\" and why)");
  bench_cmd->add_option("--jobs", bench.jobs,
                        "Imports, extension builds and torch.compile warm-ups at once (default: half the cores)");
  bench_cmd->add_option("--seed", bench.seed,
                        "The seed before get_init_inputs, Model and ModelNew (default 42, as KernelBench)");
  bench_cmd->add_flag("--no-overlap{false}", bench.overlap,
                      "Build the models and warm torch.compile only after the run. By default they start\n"
                      "while the run reviews (a model as soon as its task is exported), which saves most\n"
                      "of the measurement's preparation, and the run's own timings share the GPU with up\n"
                      "to three warm-ups per GPU");
  return [&o, bench_cmd]() -> std::optional<int> {
    if (*bench_cmd) return bench_problems(o.bench, o.g);
    return std::nullopt;
  };
}

command_action add_trajectory(CLI::App& app, option_values& o) {
  auto& trajectory_task = o.trajectory_task;
  auto& trajectory_memory = o.trajectory_memory;
  auto* trajectory = app.add_subcommand("trajectory",
                                        "Print a task's trajectory (short-term memory): every attempt, review,\n"
                                        "plan and repair in order; without TASK, list the tasks that have one");
  trajectory->add_option("task", trajectory_task, "Task name");
  trajectory->add_option("--memory", trajectory_memory, "The memory store directory (default ks-memory)");
  return [&o, trajectory]() -> std::optional<int> {
    if (*trajectory) return show_trajectory(o.trajectory_memory, o.trajectory_task);
    return std::nullopt;
  };
}

// store check and store repair.
command_action add_store(CLI::App& app, option_values& o) {
  auto& store_memory = o.store_memory;
  auto& config_path = o.config_path;
  auto* store_cmd =
      app.add_subcommand("store", "Check a memory store for damage, or salvage a damaged one (docs/store.md)");
  store_cmd->require_subcommand(1);
  auto* store_check_cmd =
      store_cmd->add_subcommand("check",
                                "Look at a store without changing it: the checks the daemon makes when it\n"
                                "starts, every table's checksums, and what a repair could read. Exit status 0\n"
                                "healthy, 1 damaged. Stop the daemon first (or check a copy).");
  auto* store_repair_cmd =
      store_cmd->add_subcommand("repair",
                                "Salvage a damaged store: the damaged directory is moved aside whole\n"
                                "(DIR.damaged-TIME) and a new store is built at DIR from everything that can\n"
                                "be read. Lists every thing it could not recover; no task number is reused.\n"
                                "Exit status 0 nothing acknowledged is missing, 5 repaired with losses\n"
                                "(listed), 1 it could not repair (nothing was changed). Stop the daemon first.");
  for (auto* sub : {store_check_cmd, store_repair_cmd}) {
    sub->add_option("--memory", store_memory, "The memory store directory");
    sub->add_option("--config", config_path, "A config whose memory.path names the store")->check(CLI::ExistingFile);
  }
  return [&o, store_check_cmd, store_repair_cmd]() -> std::optional<int> {
    if (!*store_check_cmd && !*store_repair_cmd) return std::nullopt;
    auto path = store_path(o.store_memory, o.config_path, o.g);
    if (!path) {
      std::cerr << "kernelskill store: " << path.message() << "\n";
      return 2;
    }
    return *store_check_cmd ? store_check(*path) : store_repair(*path);
  };
}

// CLI11 reports an unknown subcommand only as "a subcommand is required": says which
// one it is (exit status 2), or returns nullopt.
std::optional<int> reject_unknown_subcommand(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (arg.rfind("-", 0) == 0) continue;
    bool known = false;
    for (auto* sub : app.get_subcommands({})) known = known || sub->get_name() == arg;
    if (!known) {
      std::cerr << "kernelskill: unknown subcommand '" << arg
                << "' (expected run, serve, check, task, plan, lower, export, import, bench, devices, skills,\n"
                   "  trajectory, store, submit, status, cancel, priority, result or watch; see --help)\n";
      return 2;
    }
    break;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  option_values o;  // outlives app, which writes into it
  CLI::App app{
      "kernelskill: makes GPU kernels faster.\n"
      "Give it PyTorch reference programs (tasks); a team of agents writes CUDA kernels that\n"
      "compute the same thing, checks them against the reference on a GPU, profiles them,\n"
      "and picks each next optimisation from an explicit library of expert skills.\n"
      "GPU work runs in kernelskill-gpu worker processes, local or on other machines."};
  app.set_version_flag("--version", std::string("kernelskill 0.1.0 (") + ks::protocol_version + ")");
  app.require_subcommand(1);
  app.add_option("--log-level", o.g.log_level,
                 "trace, debug, info, warn, error or off; overrides the config's logging.level");
  // In the order --help lists them.
  const command_action actions[] = {
      add_experiment_commands(app, o),
      add_file_checks(app, o),
      add_devices(app, o),
      add_skills(app, o),
      add_lower(app, o),
      add_import(app, o),
      add_export(app, o),
      add_bench(app, o),
      add_trajectory(app, o),
      add_store(app, o),
      add_client_commands(app),
  };
  if (auto rc = reject_unknown_subcommand(app, argc, argv)) return *rc;
  // CLI11's own exit codes (105 for a value out of range, 106 for a missing one, …)
  // would contradict the documented 2 for every usage error.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& action : actions)
    if (auto rc = action()) return *rc;
  std::cerr << app.help();
  return 2;
}
