#!/usr/bin/env python3
"""KernelBench's problems at other sizes: odd ones, not multiples of 8.

Issue 46: results must hold at sizes other than the published ones (the 3xTF32 path
and the epilogue kernels fell off a cliff at odd sizes). This writes a copy of
KernelBench's KernelBench/ folder (level1..3) whose problems keep their code and change
only their module-level integer constants (batch_size, in_features, height, ...):

- a constant of 16 or more that is even becomes one less (1024 -> 1023, 8192 -> 8191),
  so every dimension the problem takes from it is odd and no multiple of 8;
- so does one computed from integers only (N = 2048 * 2 -> N = 4095);
- constants under 16 (kernel sizes, strides, paddings, groups, heads) stay as they are;
- a constant that splits another into equal parts (its name says group, head, window,
  patch, split or chunk) stays as it is, and so does one it divides and is used with in
  one statement (nn.GroupNorm(num_groups, out_features)): 4096 channels in 64 groups
  cannot become 4095. The rest of the problem still moves.

With --small, such a constant becomes a sixteenth of itself instead, odd and at least
15 (8192 -> 511, 1024 -> 63, 256 -> 15): problems small enough to run on the CPU, for
bench/kernelbench/emulate.sh. Where PyTorch imports, each problem so resized is run
once (its Model built from get_init_inputs, forward on get_inputs); one that fails (an
image shrunk below what a network's layers take or its class's fixed image size, a
sequence no longer a multiple of its block) gets back the published value of one
changed constant at a time, the first that runs; else the odd sizes; else it is left
as published. SIZES.md says which, and why.

Nothing is chosen by problem: the same rule reads every file. What changed is listed
in SIZES.md of the output folder, a line per problem.

  python3 bench/kernelbench/resize.py [--small] KERNELBENCH_DIR OUT_DIR
  (then e.g. PICK2=12,14 bench/run.sh kernelbench OUT_DIR)
"""
import ast
import re
import pathlib
import sys


def int_value(node):
    """The value of an integer literal or of +, -, *, // and ** over them; else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp):
        a, b = int_value(node.left), int_value(node.right)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b if b else None,
               ast.Pow: lambda: a ** b if 0 <= b <= 64 else None}
        if a is None or b is None or type(node.op) not in ops:
            return None
        return ops[type(node.op)]()
    return None


def int_constants(tree):
    """The module-level `NAME = <integer expression>` assignments: name -> (value, node)."""
    out = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            v = int_value(node.value)
            if v is not None:
                out[node.targets[0].id] = (v, node)
    return out


# Constants that split another into equal parts: channels into groups, a width into
# heads, an image into patches or windows. Named so in every KernelBench problem.
DIVISOR = re.compile(r"group|head|window|patch|split|chunk", re.IGNORECASE)


def together(tree):
    """The sets of names each simple statement of the problem's code uses (a name, or an
    attribute such as self.num_groups), outside get_inputs and get_init_inputs (whose
    lists name every size at once)."""
    out = []

    def visit(node):
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            return
        if isinstance(node, ast.stmt) and not any(isinstance(c, ast.stmt) for c in ast.iter_child_nodes(node)):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            out.append(names)
            return
        for c in ast.iter_child_nodes(node):
            visit(c)

    visit(tree)
    return out


def tied(name, consts, uses):
    """Whether `name` splits another constant into equal parts, or is split so: a
    divisor's name, or a constant used in one statement with a divisor that divides it
    (nn.GroupNorm(num_groups, out_features)). The batch is never split so."""
    if DIVISOR.search(name):
        return True
    if "batch" in name.lower():
        return False
    v = consts[name][0]
    return any(DIVISOR.search(other) and w > 1 and v % w == 0 and any(name in u and other in u for u in uses)
               for other, (w, _) in consts.items() if other != name)


def smaller(v, small):
    """The constant's new value: one less, or with `small` a sixteenth, odd, >= 15."""
    if not small:
        return v - 1
    w = max(15, v // 16)
    return w - 1 if w % 2 == 0 else w


def resize(text, small=False, keep=()):
    """The problem's text at odd (or small) sizes, and what changed ("name a->b", ...);
    the constants named in `keep` stay as published."""
    tree = ast.parse(text)
    consts = int_constants(tree)
    uses = together(tree)
    lines = text.splitlines(keepends=True)
    changes = []
    for name, (v, node) in consts.items():
        if v < 16 or v % 2 or name in keep or tied(name, consts, uses):
            continue
        new = smaller(v, small)
        if node.value.lineno != node.value.end_lineno:
            continue  # an expression over several lines: left as published
        line = lines[node.lineno - 1]
        col, end = node.value.col_offset, node.value.end_col_offset
        lines[node.lineno - 1] = line[:col] + str(new) + line[end:]
        changes.append(f"{name} {v}->{new}")
    return "".join(lines), changes


def run_error(text, name):
    """Why the problem does not run (its Model built, forward once, on the CPU); None
    when it does, or when PyTorch is not there to tell."""
    try:
        import torch
    except ImportError:
        return None
    scope = {"__name__": "ks_resized_problem"}
    try:
        exec(compile(text, name, "exec"), scope)
        torch.manual_seed(0)
        model = scope["Model"](*scope["get_init_inputs"]())
        with torch.no_grad():
            model(*scope["get_inputs"]())
    except Exception as e:  # the problem's own failure, whatever it is
        return f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    return None


def small_that_runs(text, name):
    """The problem at small sizes where it runs there, else the nearest that does: the
    text and what changed."""
    new, changes = resize(text, True)
    why = run_error(new, name) if changes else None
    if why is None:
        return new, changes
    for kept in [c.split()[0] for c in changes]:
        retry, retry_changes = resize(text, True, keep={kept})
        if run_error(retry, name) is None:
            return retry, retry_changes + [f"{kept} kept (small, it fails: {why})"]
    odd, odd_changes = resize(text, False)
    if run_error(odd, name) is None:
        return odd, odd_changes + [f"odd sizes, not small (small, it fails: {why})"]
    return text, [f"left as published (small, it fails: {why})"]


def main(argv):
    small = "--small" in argv
    argv = [a for a in argv if a != "--small"]
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    src, dst = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    if not (src / "level1").is_dir():
        sys.stderr.write(f"resize: {src} has no level1/ folder: give KernelBench's KernelBench/ folder\n")
        return 2
    report = [f"# KernelBench at {'small' if small else 'odd'} sizes (bench/kernelbench/resize.py)", ""]
    for level in sorted(p for p in src.iterdir() if p.is_dir() and p.name in ("level1", "level2", "level3")):
        (dst / level.name).mkdir(parents=True, exist_ok=True)
        for f in sorted(level.glob("*.py")):
            text = f.read_text()
            try:
                new, changes = small_that_runs(text, f.name) if small else resize(text)
            except SyntaxError as e:
                new, changes = text, [f"left as published: it does not parse ({e.msg})"]
            (dst / level.name / f.name).write_text(new)
            report.append(f"- {level.name}/{f.name}: {', '.join(changes) or 'unchanged'}")
    (dst / "SIZES.md").write_text("\n".join(report) + "\n")
    print(f"resize: wrote {dst} ({len(report) - 2} problems; SIZES.md lists the changes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
