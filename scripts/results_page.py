#!/usr/bin/env python3
"""Writes the results of docs/benchmarks.md and docs/results/SUITE.md from the
measurements in docs/results/SUITE.csv.

    python3 scripts/results_page.py            rewrite the summaries in docs/benchmarks.md
                                               and each suite's page docs/results/SUITE.md
    python3 scripts/results_page.py --check    exit 1 (with a diff) if a page is not what
                                               the data gives (ctest runs this)

docs/results/SUITE.csv holds one row per problem per run, oldest first; a run appends
its rows at the end. The page marks where each suite's table goes:

    <!-- results SUITE -->
    (generated: do not edit)
    <!-- /results -->

and everything between the two lines is replaced by the suite's summary: a line with
the counts and geometric means, and a link to docs/results/SUITE.md, the suite's own
page, which holds that line and a table of each problem's latest row (rows whose change
was reverted since are skipped), sorted by level and problem number. The main page
stays short however many problems a suite grows to. Where every shown row has the
same commit, device and date, the line names them once; otherwise each row does. A
suite whose every row has a level (KernelBench) gets, above that, a table of what the
paper reports per level and over all: the success rate at the suite's tolerance (1e-4)
and at 1e-2, the arithmetic and the geometric mean of ours over eager, the geometric
mean over torch.compile, and fast_0 / fast_1 over eager and over torch.compile (see
level_metrics for each definition).

Columns of a results CSV (every one present, in this order; empty where the run gave
no such number):
  run            the run's name: its date and ordinal, as docs/benchmarks-log.md heads it
  date           YYYY-MM-DD
  commit         the measured tree's commit (7+ hex digits), or "unknown" (say why in note)
  device         e.g. "H200", "2x H200"
  level          KernelBench's level (1, 2, 3); empty for a task suite
  problem        the problem file's or task's name
  eager_ms, compile_ms, ours_ms
                 medians of PyTorch eager, torch.compile and our kernel (ms)
  over_eager, over_compile
                 the speedups as the run reported them (eager / ours, compile / ours);
                 used where the times are missing
  correct        yes / no / empty (not checked): ours at the suite's tolerance
  correct_1e-2   yes / no / empty: KernelBench's older tolerance
  review_speedup the run's own review (reviewer against the reference), where the side
                 by side did not run
  rounds, max_abs_error, note
  reverted       yes when the measured change was reverted since (kept as history)

A lowering-status CSV (docs/results/kb-lower.csv: where each KernelBench problem stands
before the GPU, bench/kernelbench/lower_status.sh) has these columns instead:
  run, date, commit, device, level, problem   as above
  imported, lowered   yes / no
  seconds             the lowering's wall time (empty where it did not run)
  peak_mib            its peak resident memory, graph export included (MiB)
  reason              why it was not imported or not lowered (empty where it was)
and its table lists each problem's latest row, with the counts.

A CPU-emulation CSV (docs/results/kb-emulate.csv: KernelBench at small sizes, each
task's seeds run on the CPU against its reference, bench/kernelbench/emulate.sh):
  run, date, commit, device, level, problem   as above
  imported            yes / no
  seeds, correct      how many seeds ran, how many matched the reference
  max_abs_error       the largest error of a correct seed (empty where none was)
  seconds             the seeds' wall time
  reason              why not imported, not lowered, or the first wrong seed's error;
                      it starts "unstable at these sizes" where the reference on all
                      threads and on one differ past the tolerance (counted apart)
and its table lists each problem's latest row, with the counts.

Python 3 standard library only.
"""
import argparse
import csv
import difflib
import math
import os
import re
import sys

UNSTABLE = "unstable at these sizes"
COLUMNS = ["run", "date", "commit", "device", "level", "problem", "eager_ms", "compile_ms", "ours_ms",
           "over_eager", "over_compile", "correct", "correct_1e-2", "review_speedup", "rounds",
           "max_abs_error", "reverted", "note"]
STATUS_COLUMNS = ["run", "date", "commit", "device", "level", "problem", "imported", "lowered", "seconds",
                  "peak_mib", "reason"]
EMULATE_COLUMNS = ["run", "date", "commit", "device", "level", "problem", "imported", "seeds", "correct",
                   "max_abs_error", "seconds", "reason"]
NUMBERS = ["eager_ms", "compile_ms", "ours_ms", "over_eager", "over_compile", "review_speedup",
           "max_abs_error"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = re.compile(r"^<!-- results ([a-z0-9_-]+) -->$")
END = "<!-- /results -->"


class DataError(Exception):
    pass


def read_suite(path):
    """The rows of one results CSV, checked: a bad value names its file, line and column."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header not in (COLUMNS, STATUS_COLUMNS, EMULATE_COLUMNS):
            raise DataError(f"{path}:1: the columns must be exactly: {','.join(COLUMNS)} "
                            f"(or, for a lowering status: {','.join(STATUS_COLUMNS)}; for a CPU emulation: "
                            f"{','.join(EMULATE_COLUMNS)})")
        rows = []
        for cells in reader:
            where = f"{path}:{reader.line_num}"
            if len(cells) != len(header):
                raise DataError(f"{where}: {len(cells)} fields, expected {len(header)}")
            row = dict(zip(header, cells))
            {"r": check_row, "s": check_status_row, "e": check_emulate_row}[
                "r" if header == COLUMNS else "s" if header == STATUS_COLUMNS else "e"](row, where)
            rows.append(row)
    return rows


def check_common(row, where):
    """The columns both kinds of CSV have."""
    def bad(column, why):
        raise DataError(f"{where}: column {column} = {row[column]!r}: {why}")
    for column in ("run", "date", "commit", "device", "problem"):
        if not row[column]:
            bad(column, "must not be empty")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"]):
        bad("date", "not YYYY-MM-DD")
    if row["commit"] != "unknown" and not re.fullmatch(r"[0-9a-f]{7,40}", row["commit"]):
        bad("commit", "neither a commit (7 or more hex digits) nor 'unknown'")
    if row["level"] and not row["level"].isdigit():
        bad("level", "not a level number")


def check_nonnegative(row, where, columns):
    """Each of `columns`, where not empty, a finite number >= 0."""
    for column in columns:
        if not row[column]:
            continue
        try:
            v = float(row[column])
        except ValueError:
            raise DataError(f"{where}: column {column} = {row[column]!r}: not a number")
        if not math.isfinite(v) or v < 0:
            raise DataError(f"{where}: column {column} = {row[column]!r}: not a finite number >= 0")


def check_status_row(row, where):
    def bad(column, why):
        raise DataError(f"{where}: column {column} = {row[column]!r}: {why}")
    check_common(row, where)
    if row["commit"] == "unknown" and not row["reason"]:
        bad("reason", "a row whose commit is unknown says why in its reason")
    for column in ("imported", "lowered"):
        if row[column] not in ("yes", "no"):
            bad(column, "yes or no")
    if row["imported"] == "no" and row["lowered"] == "yes":
        bad("lowered", "a problem that was not imported cannot have been lowered")
    if row["lowered"] == "no" and not row["reason"]:
        bad("reason", "a problem not lowered says why")
    check_nonnegative(row, where, ("seconds", "peak_mib"))


def check_emulate_row(row, where):
    def bad(column, why):
        raise DataError(f"{where}: column {column} = {row[column]!r}: {why}")
    check_common(row, where)
    if row["imported"] not in ("yes", "no"):
        bad("imported", "yes or no")
    for column in ("seeds", "correct"):
        if not row[column].isdigit():
            bad(column, "a count")
    if int(row["correct"]) > int(row["seeds"]):
        bad("correct", "more correct seeds than seeds")
    if (row["imported"] == "no" or int(row["correct"]) < int(row["seeds"]) or row["seeds"] == "0") \
            and not row["reason"]:
        bad("reason", "a problem not imported, or with a seed not correct, says why")
    check_nonnegative(row, where, ("max_abs_error", "seconds"))


def check_row(row, where):
    def bad(column, why):
        raise DataError(f"{where}: column {column} = {row[column]!r}: {why}")
    check_common(row, where)
    if row["commit"] == "unknown" and not row["note"]:
        bad("note", "a row whose commit is unknown says why in its note")
    for column in NUMBERS:
        if row[column]:
            try:
                v = float(row[column])
            except ValueError:
                bad(column, "not a number")
            if not math.isfinite(v) or v < 0:
                bad(column, "not a finite number >= 0")
    for column in ("correct", "correct_1e-2"):
        if row[column] not in ("", "yes", "no"):
            bad(column, "yes, no or empty")
    if row["reverted"] not in ("", "yes"):
        bad("reverted", "yes or empty")
    if row["rounds"] and not row["rounds"].isdigit():
        bad("rounds", "not a whole number")


def latest(rows):
    """Each problem's last row, reverted ones left out."""
    last = {}
    for row in rows:
        if row.get("reverted") != "yes":
            last[(row["level"], row["problem"])] = row
    return list(last.values())


def order(row):
    m = re.match(r"(\d+)", row["problem"])
    return (int(row["level"] or 0), int(m.group(1)) if m else 0, row["problem"])


def ratio(row, over):
    """Ours' speedup over eager or compile for the geometric mean: from the times where both
    are there (the stated ratios are rounded), else as the run reported it; None where
    there is neither."""
    base = row["eager_ms" if over == "eager" else "compile_ms"]
    if base and row["ours_ms"] and float(row["ours_ms"]) > 0:
        return float(base) / float(row["ours_ms"])
    stated = row["over_" + over]
    return float(stated) if stated else None


def shown_ratio(row, over):
    """The speedup as the table shows it: as the run reported it where it did, so that the
    page says what the log says; else from the times."""
    stated = row["over_" + over]
    return float(stated) if stated else ratio(row, over)


def cell(v, fmt):
    return "—" if v is None else fmt.format(v)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def provenance(shown):
    """commit, device and date: (the keys that differ between rows, each a table column;
    the (key, value) pairs they agree on, named once in the summary line)."""
    varying = [k for k in ("commit", "device", "date") if len({r[k] for r in shown}) > 1]
    return varying, [(k, shown[0][k]) for k in ("commit", "device", "date") if k not in varying]


def summary_tail(shown, common):
    """The summary line's end: what the rows agree on, and which runs they come from."""
    tail = "; " + ", ".join(f"{k} {v}" for k, v in common) if common else ""
    runs = {r["run"] for r in shown}
    return tail + (f"; the latest rows of {len(runs)} runs combined" if len(runs) > 1 else f"; run: {runs.pop()}")


def render_status(rows):
    """A lowering-status suite's summary line and its table (each a list of Markdown lines)."""
    shown = sorted(latest(rows), key=order)
    varying, common = provenance(shown)
    head = ["level", "problem", "imported", "lowered", "seconds", "peak MiB", "why not"] + varying
    out = ["| " + " | ".join(head) + " |",
           "| " + " | ".join(["---:", "---", "---", "---", "---:", "---:", "---"] + ["---"] * len(varying)) + " |"]
    for r in shown:
        why = r["reason"].replace("|", "\\|").replace("\n", " ")
        cells = [r["level"], r["problem"], r["imported"], r["lowered"], r["seconds"] or "—",
                 r["peak_mib"] or "—", why or ""] + [r[k] for k in varying]
        out.append("| " + " | ".join(cells) + " |")
    imported = sum(1 for r in shown if r["imported"] == "yes")
    lowered = sum(1 for r in shown if r["lowered"] == "yes")
    line = f"{len(shown)} problems, {imported} imported, {lowered} lowered"
    levels = sorted({r["level"] for r in shown if r["level"]}, key=int)
    if len(levels) > 1:
        def counts(lv):
            rs = [r for r in shown if r["level"] == lv]
            return (f"level {lv}: {len(rs)}, {sum(r['imported'] == 'yes' for r in rs)}, "
                    f"{sum(r['lowered'] == 'yes' for r in rs)}")
        line += " (" + "; ".join(counts(lv) for lv in levels) + ")"
    return [line + summary_tail(shown, common) + "."], out


def render_emulate(rows):
    """A CPU-emulation suite's summary line and its table (each a list of Markdown lines)."""
    shown = sorted(latest(rows), key=order)
    varying, common = provenance(shown)
    head = ["level", "problem", "imported", "seeds correct", "max abs error", "seconds", "why not"] + varying
    out = ["| " + " | ".join(head) + " |",
           "| " + " | ".join(["---:", "---", "---", "---:", "---:", "---:", "---"] + ["---"] * len(varying)) + " |"]
    for r in shown:
        why = r["reason"].replace("|", "\\|").replace("\n", " ")
        cells = [r["level"], r["problem"], r["imported"], f"{r['correct']} of {r['seeds']}",
                 r["max_abs_error"] or "—", r["seconds"] or "—", why] + [r[k] for k in varying]
        out.append("| " + " | ".join(cells) + " |")

    def counts(rs):
        ok = sum(1 for r in rs if r["seeds"] != "0" and r["correct"] == r["seeds"])
        # a wrong seed where the reference disagrees with itself is not counted against us
        unstable = sum(1 for r in rs if r["correct"] != r["seeds"] and r["reason"].startswith(UNSTABLE))
        return (f"{len(rs)} problems, {sum(r['imported'] == 'yes' for r in rs)} imported, every seed correct on {ok}"
                + (f", {unstable} with a reference unstable at these sizes" if unstable else ""))
    line = counts(shown)
    levels = sorted({r["level"] for r in shown if r["level"]}, key=int)
    if len(levels) > 1:
        line += " (" + "; ".join(f"level {lv}: " + counts([r for r in shown if r["level"] == lv]) for lv in levels) + ")"
    return [line + summary_tail(shown, common) + "."], out


def level_metrics(rows):
    """The paper's numbers over one level's latest rows (docs/bench.md, "The metrics"):
    a dict of counts and values, None where there is nothing to take them over.

    known       rows whose correctness was checked (correct is yes or no); a row that
                says nothing (a review only) is pending and in no denominator
    rate_1e-4   correct at the suite's tolerance, of known
    rate_1e-2   correct at 1e-2 (correct_1e-2 yes, or correct yes: within 1e-4 is within
                1e-2), of known
    mean_eager, geomean_eager   arithmetic and geometric mean of eager / ours over the
                correct rows with a speedup (n_eager of them)
    geomean_compile             the same over torch.compile (n_compile)
    fast_P_eager, fast_P_compile (P = 0, 1)   KernelBench's fast_p: the share of known
                rows that are correct and faster than the baseline by more than P; a
                correct row whose speed was not measured side by side (a review only)
                is in neither count, as its speed is not known"""
    known = [r for r in rows if r["correct"] in ("yes", "no")]
    correct = [r for r in known if r["correct"] == "yes"]
    loose = [r for r in known if r["correct"] == "yes" or r["correct_1e-2"] == "yes"]
    m = {"problems": len(rows), "known": len(known), "correct": len(correct), "correct_1e-2": len(loose)}
    m["rate_1e-4"] = len(correct) / len(known) if known else None
    m["rate_1e-2"] = len(loose) / len(known) if known else None
    for over in ("eager", "compile"):
        xs = [x for x in (ratio(r, over) for r in correct) if x is not None and x > 0]
        m["n_" + over] = len(xs)
        m["geomean_" + over] = geomean(xs) if xs else None
        m["mean_" + over] = sum(xs) / len(xs) if xs else None
        timed = [r for r in known if r["correct"] != "yes" or ratio(r, over) is not None]
        for p in (0, 1):
            fast = sum(1 for r in correct if (ratio(r, over) or 0) > p)
            m[f"fast_{p}_{over}"] = fast / len(timed) if timed else None
    return m


def render_levels(shown):
    """Per level (and over all, where there are several), the paper's numbers as a table."""
    groups = [(lv, [r for r in shown if r["level"] == lv]) for lv in sorted({r["level"] for r in shown}, key=int)]
    if len(groups) > 1:
        groups.append(("all", shown))
    share = lambda v: "—" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    out = ["| level | problems | correct @1e-4 | correct @1e-2 | over eager: mean | geomean | "
           "over compile: geomean | fast_0 eager | fast_1 eager | fast_0 compile | fast_1 compile |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for lv, rows in groups:
        m = level_metrics(rows)
        out.append("| " + " | ".join([
            lv, str(m["problems"]),
            f"{share(m['rate_1e-4'])} ({m['correct']}/{m['known']})",
            f"{share(m['rate_1e-2'])} ({m['correct_1e-2']}/{m['known']})",
            cell(m["mean_eager"], "{:.3f}x"), cell(m["geomean_eager"], "{:.3f}x") + f" ({m['n_eager']})",
            cell(m["geomean_compile"], "{:.3f}x") + f" ({m['n_compile']})",
            share(m["fast_0_eager"]), share(m["fast_1_eager"]),
            share(m["fast_0_compile"]), share(m["fast_1_compile"])]) + " |")
    return out


def render(suite, rows):
    """One suite's summary (for a suite of KernelBench levels, the per-level numbers,
    then a line with the counts and means) and its per-problem table, each a list of
    Markdown lines."""
    if not rows:
        raise DataError(f"docs/results/{suite}.csv has no rows")
    if "lowered" in rows[0]:
        return render_status(rows)
    if "seeds" in rows[0]:
        return render_emulate(rows)
    shown = sorted(latest(rows), key=order)
    levels = any(r["level"] for r in shown)
    head_table = render_levels(shown) + [""] if levels and all(r["level"] for r in shown) else []
    varying, common = provenance(shown)
    head = (["level"] if levels else []) + ["problem", "eager ms", "compile ms", "ours ms", "over eager",
                                            "over compile", "correct"] + varying
    align = (["---:"] if levels else []) + ["---", "---:", "---:", "---:", "---:", "---:", "---"] + \
        ["---"] * len(varying)
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for r in shown:
        oe, oc = shown_ratio(r, "eager"), shown_ratio(r, "compile")
        over_eager = cell(oe, "{:.2f}x")
        if oe is None and r["review_speedup"]:
            over_eager = f"{float(r['review_speedup']):.3g}x (review)"
        cells = ([r["level"]] if levels else []) + [
            r["problem"], r["eager_ms"] or "—", r["compile_ms"] or "—", r["ours_ms"] or "—",
            over_eager, cell(oc, "{:.2f}x"), r["correct"] or "—"] + [r[k] for k in varying]
        out.append("| " + " | ".join(cells) + " |")
    correct = [r for r in shown if r["correct"] == "yes"]
    te = [ratio(r, "eager") for r in correct if ratio(r, "eager") is not None]
    tc = [ratio(r, "compile") for r in correct if ratio(r, "compile") is not None]
    line = f"{len(shown)} problems, {len(correct)} correct"
    if te:
        line += f"; ours over eager {geomean(te):.3f}x in geometric mean over the {len(te)} correct and timed"
    if tc:
        line += f", over torch.compile {geomean(tc):.3f}x over {len(tc)}"
    return head_table + [line + summary_tail(shown, common) + "."], out


def detail_page(suite, summary, table):
    """docs/results/SUITE.md: the suite's per-problem table, under its summary."""
    return "\n".join([f"# {suite}: each problem's latest row", "",
                      f"Generated by scripts/results_page.py from [{suite}.csv]({suite}.csv): do not edit. "
                      "The suite's method and its commands: [benchmarks.md](../benchmarks.md).", ""]
                     + summary + [""] + table) + "\n"


def generate(page_text, results_dir):
    """The page with every marked suite's summary rewritten from results_dir, and each
    suite's page of its per-problem table (suite -> text)."""
    lines = page_text.split("\n")
    out, i, seen, details = [], 0, set(), {}
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        suite = m.group(1)
        if suite in seen:
            raise DataError(f"the page marks suite {suite} twice")
        seen.add(suite)
        end = next((j for j in range(i, len(lines)) if lines[j] == END), None)
        if end is None:
            raise DataError(f"the page's '<!-- results {suite} -->' has no '{END}' after it")
        path = os.path.join(results_dir, suite + ".csv")
        if not os.path.exists(path):
            raise DataError(f"the page marks suite {suite}, but {path} does not exist")
        summary, table = render(suite, read_suite(path))
        out += summary + ["", f"Each problem's latest row: [results/{suite}.md](results/{suite}.md)."]
        details[suite] = detail_page(suite, summary, table)
        i = end
    if not seen:
        raise DataError("the page has no '<!-- results SUITE -->' marker")
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".csv") and name[:-4] not in seen:
            raise DataError(f"{os.path.join(results_dir, name)} has no table on the page "
                            f"(add '<!-- results {name[:-4]} -->' and '{END}')")
    return "\n".join(out), details


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="The CSV columns are described at the top of this script.")
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 if a page differs")
    ap.add_argument("--page", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--details", help="where each suite's per-problem page SUITE.md goes (default: --results)")
    a = ap.parse_args()
    details_dir = a.details or a.results
    try:
        with open(a.page) as f:
            text = f.read()
        new, details = generate(text, a.results)
        pages = [(a.page, text, new)]
        for suite, body in details.items():
            path = os.path.join(details_dir, suite + ".md")
            old = open(path).read() if os.path.exists(path) else ""
            pages.append((path, old, body))
    except (DataError, OSError) as e:
        print(f"results_page: {e}", file=sys.stderr)
        return 2
    if a.check:
        stale = [(path, old, body) for path, old, body in pages if old != body]
        if not stale:
            print(f"results_page: {a.page} and its {len(details)} suite pages match {a.results}")
            return 0
        for path, old, body in stale:
            diff = difflib.unified_diff(old.split("\n"), body.split("\n"), path, "generated", lineterm="", n=1)
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        print(f"results_page: {', '.join(p for p, _, _ in stale)} not what {a.results} gives: run "
              "python3 scripts/results_page.py and commit the pages", file=sys.stderr)
        return 1
    wrote = 0
    for path, old, body in pages:
        if old != body:
            with open(path, "w") as f:
                f.write(body)
            wrote += 1
    print(f"results_page: wrote {wrote} of {len(pages)} pages" if wrote else "results_page: every page already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
