"""Scheduling quality: trained policies against every heuristic on the test part of every
shared SWF trace, at its native load and at a higher one (issue 19).

    python bench/quality.py --checkpoint runs/demo [--checkpoint runs/seed1 ...]
        [--traces ../shared/traces] [--windows 20] [--jobs 1024] [--out runs/quality]
        [--readme README.md] [--quick]

Windows: up to --windows consecutive windows of --jobs jobs from the first job of each
trace's test part (the checkpoints' data.split, else 0.7/0.1/0.2), the last one clipped at
the part's end; a part shorter than one window is one window of the whole part. Schedulers:
every heuristic order x {easy, conservative} x estimate {request, predicted} (24 rows), and
each checkpoint's greedy policy under both backfills (with the requests, as it trained),
run by ddppo_hpc.evaluate's functions. Per trace and load it prints mean avg bsld and avg
wait with their 95% t-intervals over windows, and each policy's paired ratio to the best
heuristic (lowest mean avg bsld of the 24) with a 95% paired bootstrap interval; it writes
<out>/<trace>-<load>.h5 (the evaluate schema; `python -m ddppo_hpc.analyze FILE` reads it;
with several checkpoints, one file per checkpoint: <trace>-<load>-ckpt<k>.h5) and ends
with a summary table (--readme: in Markdown between the quality markers of FILE).

Higher load: submit times x 0.7 for every trace (the job order does not change): 43% more
jobs per unit of time. Measured 2026-12-02, FCFS+EASY's mean avg bsld over each trace's
test windows (split 0.7/0.1/0.2, up to 20 x 1024 jobs):

    trace        jobs     test windows   native   x0.9    x0.8    x0.7    x0.5
    lublin_256   10,000   2              232.6    229.9   331.4   352.2   463.4
    KTH-SP2      28,475   6              41.5     48.8    64.2    112.3   325.9
    LANL-CM5     122,057  20             51.4     85.8    168.5   286.7   608.8
    HPC2N        3,145    1 (629 jobs)   34.6     53.3    64.7    130.9   211.4

Every native load already gives FCFS+EASY a mean avg bsld above 20 (the issue's floor), so
the floor alone would pick 0.9, where the queue hardly changes (KTH: 41.5 to 48.8). At
0.7 it is 1.5x (lublin_256, already saturated) to 5.6x (LANL-CM5) the native level: long
queues, the case where ordering and backfilling decisions matter most. One factor for all
keeps the loads comparable across traces.

--quick: HPC2N and KTH-SP2, 4 windows, EASY only, both loads (8 s here; the whole run 19 s).
Prints tables and asserts nothing about time; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ddppo_hpc.analyze import readme_block
from ddppo_hpc.args import bounded_int
from ddppo_hpc.config import ConfigError
from ddppo_hpc.data import read_swf
from ddppo_hpc.data.source import at_load, sources
from ddppo_hpc.data.split import DEFAULT_SPLIT, describe, part_range
from ddppo_hpc.evaluate import (
    TRAINED,
    embedded_name,
    load_checkpoint,
    run_config,
    run_rank,
    schedulers,
    trace_sha256,
    trained_policy,
    versions,
)
from ddppo_hpc.io import atomic_write, output_errors
from ddppo_hpc.progress import Progress
from ddppo_hpc.results import results_of, rows_of, scheduler_label, write_results
from ddppo_hpc.sim import ESTIMATES, POLICIES, protocol_windows

ROOT = Path(__file__).resolve().parent.parent
LOAD_FACTORS = {"lublin_256": 0.7, "KTH-SP2": 0.7, "LANL-CM5": 0.7, "HPC2N": 0.7}  # docstring
BACKFILLS = ("easy", "conservative")
QUICK = {"traces": ("HPC2N", "KTH-SP2"), "windows": 4, "backfills": ("easy",)}
RESAMPLES, BOOTSTRAP_SEED = 10_000, 0
BEGIN, END = "<!-- quality:begin -->", "<!-- quality:end -->"
PROG = "bench/quality.py"


def paired_ratio(
    policy: np.ndarray, best: np.ndarray, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float | None, float | None]:
    """(ratio, low, high): ratio = mean(policy) / mean(best) of two schedulers' per-window
    avg bsld on the same windows, and its 95% paired bootstrap interval (percentiles 2.5 and
    97.5 of the ratio over `resamples` resamples of the windows with replacement, the same
    resample for both schedulers, seeded). One window gives no interval: (ratio, None, None)."""
    policy, best = np.asarray(policy, dtype=np.float64), np.asarray(best, dtype=np.float64)
    ratio = float(policy.mean() / best.mean())
    if len(policy) < 2:
        return ratio, None, None
    picks = np.random.default_rng(seed).integers(0, len(policy), (resamples, len(policy)))
    ratios = policy[picks].mean(axis=1) / best[picks].mean(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return ratio, float(low), float(high)


def short_name(path: Path) -> str:
    """`KTH-SP2` of KTH-SP2-1996-2.1-cln.swf.gz: the name's parts before the first that
    starts with a digit."""
    parts = path.name.removesuffix(".swf.gz").split("-")
    digit = next((i for i, p in enumerate(parts) if p[:1].isdigit()), len(parts))
    return "-".join(parts[: max(digit, 1)])


def load_policies(paths: list[str]) -> list[dict]:
    """Each checkpoint's config, policy and attributes; ValueError for a GPU-mode run or
    checkpoints whose data.split differs (their test windows would differ)."""
    policies = []
    for path in paths:
        loaded = load_checkpoint(path)
        config = run_config(loaded)
        if config.gpu.mode != "off":
            raise ValueError(
                f"{loaded[1]}: trained in GPU mode ({config.gpu.mode}): not an HPC policy"
            )
        policies.append({"path": path, "loaded": loaded, "config": config})
        policies[-1]["model"] = trained_policy(loaded, config)
    if len({tuple(p["config"].data.split) for p in policies}) > 1:
        raise ValueError(
            "the checkpoints' data.split differ: their test parts are not the same jobs"
        )
    return policies


def scored_windows(trace, fractions, windows: int, jobs: int) -> tuple[list, dict, dict]:
    """(first job, jobs) of every window in the test part, the window spec and the part (the
    `split` attribute, as evaluate writes it); ValueError when the part is empty."""
    first, stop = part_range(len(trace), fractions, "test")
    part = {"part": "test", "fractions": list(fractions), "first_job": first, "stop_job": stop}
    part["trace_jobs"] = len(trace)
    if stop == first:
        where = describe("test", first, stop, len(trace), fractions)
        raise ValueError(f"{trace.source}: nothing to score in the {where}")
    spans = protocol_windows(stop, first, windows, jobs)
    if stop - first <= jobs:
        spec = {"kind": "full", "jobs": stop - first, "start": first}
    else:
        spec = {"kind": "consecutive", "windows": len(spans), "jobs": jobs, "start": first}
    return spans, spec, part


def run_schedulers(setup: dict, rows: list[tuple], label: str) -> list:
    """evaluate.run_rank for each row (policy, backfill, estimate), with progress."""
    progress, outcomes = Progress(label, len(rows), "schedulers"), []
    for done, row in enumerate(rows):
        outcomes += run_rank({**setup, "schedulers": [row]}, 0, 1)
        progress.update(done + 1)
    progress.done()
    return outcomes


def attributes(policy: dict | None, trace, path: Path, spec: dict, part: dict, args) -> dict:
    """The root attributes, as evaluate fills them (`trace`: as read, before scaling)."""
    checkpoint, file = policy["loaded"] if policy else (None, None)
    return {
        "config": json.dumps(checkpoint["config"] if checkpoint else None),
        "checkpoint": str(file.resolve()) if file else "",
        "checkpoint_update": checkpoint["update"] if checkpoint else -1,
        "versions": json.dumps(versions()),
        "trace": str(path.resolve()),
        "trace_sha256": trace_sha256(trace, str(path)),
        "machine_procs": trace.machine_procs,
        "command": shlex.join(["python", PROG, *args.argv]),
        "window_spec": json.dumps(spec),
        "split": json.dumps(part),
        "policies": ([TRAINED] if policy else []) + list(POLICIES),
        "backfills": list(args.backfills),
        "estimates": list(ESTIMATES),
        "ranks": 1,
    }


def summary_line(s: dict, r: int) -> str:
    cells = [f"{scheduler_label(s['policy'][r], s['estimate'][r]):<20}{s['backfill'][r]:<14}"]
    cells.append(f"{s['windows'][r]:>8}  ")
    for m, d in (("avg_bsld", 2), ("avg_wait", 0)):
        low, high = s[f"{m}_low"][r], s[f"{m}_high"][r]
        cells.append(f"{s[m + '_mean'][r]:>12.{d}f} [{low:.{d}f}, {high:.{d}f}]".ljust(34))
    return "".join(cells)


def print_table(results, title: str, whole_part: bool) -> None:
    s = results.summary
    print(f"\n{title}")
    if whole_part:
        print("(one window: the test part is shorter than --jobs; no interval, both ends = mean)")
    head = "  " + f"{'avg bsld [95%]':>12}".ljust(34) + f"{'avg wait s [95%]':>12}".ljust(34)
    print(f"{'scheduler':<20}{'backfill':<14}{'windows':>8}{head}".rstrip())
    for r in range(len(s["policy"])):
        print(summary_line(s, r).rstrip())


def best_heuristic(summary: dict) -> tuple:
    """(policy, backfill, estimate) of the heuristic row with the lowest mean avg bsld."""
    rows = [r for r in range(len(summary["policy"])) if summary["policy"][r] != TRAINED]
    r = min(rows, key=lambda r: summary["avg_bsld_mean"][r])
    return summary["policy"][r], summary["backfill"][r], summary["estimate"][r]


def window_bsld(results, key: tuple) -> np.ndarray:
    w = results.windows
    chosen = rows_of(w, key)
    return w["avg_bsld"][chosen][np.argsort(w["window"][chosen])]


def ratio_rows(results, policy: dict, backfills, where: dict) -> list[dict]:
    """One row per backfill of the policy: its mean avg bsld and paired ratio to the best
    heuristic on the same windows; "summary" marks the one the summary shows: the policy
    under its training backfill (the first of `backfills` when that is not among them)."""
    trained = policy["config"].env.backfill
    shown = trained if trained in backfills else backfills[0]
    best = best_heuristic(results.summary)
    base = window_bsld(results, best)
    rows = []
    for trained_row in schedulers([TRAINED], backfills, [], policy["config"].env.estimate):
        backfill = trained_row[1]
        mine = window_bsld(results, trained_row)
        ratio, low, high = paired_ratio(mine, base)
        rows.append({**where, "checkpoint": policy["path"], "backfill": backfill, "best": best})
        rows[-1].update(best_bsld=float(base.mean()), bsld=float(mine.mean()), ratio=ratio)
        rows[-1].update(low=low, high=high, windows=len(base), summary=backfill == shown)
    return rows


def ratio_text(row: dict) -> str:
    if row["low"] is None:
        return f"{row['ratio']:.3f} [n/a: one window, nothing to resample]"
    return f"{row['ratio']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


def best_label(row: dict) -> str:
    policy, backfill, estimate = row["best"]
    return f"{scheduler_label(policy, estimate)} + {backfill}"


def verdict(row: dict) -> str:
    return "n/a" if row["high"] is None else ("yes" if row["high"] < 1 else "no")


def evaluate_load(trace, path: Path, load: tuple[str, float], policies, args) -> list[dict]:
    """Every scheduler on the test windows of `trace` with submit times x the load factor:
    prints the table and the ratios, writes the results file(s); returns the ratio rows."""
    name, (load_name, factor) = short_name(path), load
    scaled = at_load(trace, factor)
    fractions = scored_split(policies)
    spans, spec, part = scored_windows(scaled, fractions, args.windows, args.jobs)
    spec["load_factor"] = factor
    setup = {"trace": scaled, "spans": spans, "model": None, "env": None}
    label = f"{name} {load_name}"
    heuristics = schedulers(list(POLICIES), list(args.backfills), list(ESTIMATES))
    began = time.monotonic()
    outcomes = run_schedulers(setup, heuristics, f"{label}: heuristics")
    where = describe("test", part["first_job"], part["stop_job"], len(trace), fractions)
    title = f"== {name}, {load_name} load (submit times x {factor:g}): {where}; "
    title += f"{len(spans)} window(s) of up to {args.jobs} jobs"
    rows, files = [], []
    for k, policy in enumerate(policies or [None]):
        mine = []
        if policy:
            trained = {**setup, "model": policy["model"], "env": policy["config"].env}
            own = schedulers([TRAINED], list(args.backfills), [], policy["config"].env.estimate)
            mine = run_schedulers(trained, own, f"{label}: {policy['path']}")
        attrs = attributes(policy, trace, path, spec, part, args)
        results = results_of(mine + outcomes, scaled, attrs)
        suffix = f"-ckpt{k}" if len(policies) > 1 else ""
        files.append(Path(args.out) / f"{name}-{load_name}{suffix}.h5")
        write_results(files[-1], results)
        whole = spec["kind"] == "full"
        print_table(results, title + (f" ({policy['path']})" if policy else ""), whole)
        if policy:
            where_ = {"trace": name, "load": load_name}
            rows += ratio_rows(results, policy, args.backfills, where_)
    print_ratios(rows)
    print(f"results: {', '.join(str(f) for f in files)}", flush=True)
    took = time.monotonic() - began
    print(f"{PROG}: {label}: {len(spans)} windows, {took:.1f} s", file=sys.stderr, flush=True)
    return rows


def print_ratios(rows: list[dict]) -> None:
    for row in rows:
        print(
            f"{row['checkpoint']} ({row['backfill']}) / best heuristic {best_label(row)} "
            f"({row['best_bsld']:.2f}): {ratio_text(row)}"
        )


SUMMARY_HEAD = "trace|load|checkpoint|policy backfill|best heuristic|its avg bsld|policy avg bsld"
SUMMARY_HEAD = (*SUMMARY_HEAD.split("|"), "ratio", "95% interval", "upper < 1")


def summary_cells(row: dict) -> list[str]:
    interval_ = "n/a (1 window)" if row["low"] is None else f"[{row['low']:.3f}, {row['high']:.3f}]"
    cells = [row[k] for k in ("trace", "load", "checkpoint", "backfill")] + [best_label(row)]
    cells += [f"{row['best_bsld']:.2f}", f"{row['bsld']:.2f}", f"{row['ratio']:.3f}"]
    return [*cells, interval_, verdict(row)]


def print_summary(rows: list[dict]) -> None:
    table = [list(SUMMARY_HEAD)] + [summary_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) + 2 for i in range(len(SUMMARY_HEAD))]
    print(
        "\nSummary: each policy under its training backfill; ratio = its mean avg bsld / the "
        "best heuristic's, same windows; 95% paired bootstrap interval (rough with 2 windows)"
    )
    for line in table:
        print("".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def markdown(rows: list[dict], policies: list[dict], args, windows: dict) -> str:
    lines = ["| " + " | ".join(SUMMARY_HEAD) + " |", "|---|---|---|---|---|" + "---:|" * 5]
    lines += ["| " + " | ".join(summary_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n\n" + paragraph(rows, policies, args, windows) + "\n"


def trained_how(policy: dict) -> str:
    """`runs/demo` (mlp, trained on ..., update 300 of 300, 2 ranks, easy backfilling)."""
    config, (checkpoint, _) = policy["config"], policy["loaded"]
    data, env = config.data, config.env
    trace = " + ".join(f"`{s.path}`" if s.path else embedded_name(config) for s in sources(data))
    if data.load_scale != [1.0]:
        trace += f" with submit times x {', '.join(f'{f:g}' for f in data.load_scale)}"
    return (
        f"`{policy['path']}` ({config.policy.name}, trained on {trace}, train part of split "
        f"{'/'.join(f'{f:g}' for f in data.split)}, update {checkpoint['update']} of "
        f"{config.ppo.updates}, seed {config.run.seed}, {len(checkpoint['ranks'])} ranks, "
        f"{env.backfill} backfilling in {env.backfill_order} order with the "
        f"{ESTIMATE_WORDS[env.estimate]}, reward {env.reward}{observed(config)})"
    )


def observed(config) -> str:
    """The options of the observation and the teaching that are on, in words."""
    env, ppo = config.env, config.ppo
    words = [name for name in ("history", "heuristic_ranks", "agent_backfill", "wait")
             if getattr(env, name)]  # fmt: skip
    if env.reward_baseline != "none":
        words.append(f"relative to {env.reward_baseline}")
    if ppo.imitation_updates:
        teacher = "the best heuristic of each window" if env.teacher == "best" else "its order"
        words.append(f"{ppo.imitation_updates} updates copying {teacher}")
    return "".join(f", {w}" for w in words)


ESTIMATE_WORDS = {"request": "users' requests", "predicted": "EASY++ predictions"}


def paragraph(rows: list[dict], policies: list[dict], args, windows: dict) -> str:
    """Which policies, trained how, against which baselines, on which jobs, and where the
    policy loses."""
    scored = ", ".join(f"{name} {n}" for name, n in windows.items())
    unsure = [r for r in rows if r["high"] is not None and r["low"] <= 1 <= r["high"]]
    worse = [r for r in rows if r["high"] is not None and r["low"] > 1]
    single = [r for r in rows if r["high"] is None]
    higher = " / ".join(sorted({r["load"] for r in rows} - {"native"}))
    text = (
        f"Policies: {'; '.join(trained_how(p) for p in policies)}, acting greedily and "
        "backfilling as they trained. Baselines: fcfs, sjf, wfp3, unicep, f1 and "
        f"sjbf x {' and '.join(args.backfills)} backfilling x the requests or EASY++ "
        "predictions as runtime estimates; the best heuristic is the one with the lowest mean "
        "avg bsld on the same windows. Jobs scored: the test part of each trace (the last "
        f"{scored_split(policies)[2]:g} of its jobs in submit order), up to "
        f"{args.windows} consecutive windows of {args.jobs} jobs ({scored} windows), at native "
        f"load and at a higher one (submit times {higher}). Ratios: the policy's mean avg "
        "bsld / the best heuristic's, with a 95% paired bootstrap interval over windows."
    )
    which = (lambda r: f"{r['checkpoint']}, ") if len(policies) > 1 else (lambda r: "")
    where = [
        f"{r['trace']} {r['load']} ({which(r)}{r['backfill']}, {r['ratio']:.2f}x)" for r in worse
    ]
    text += f" The policy is worse than the best heuristic on: {', '.join(where) or 'none'}."
    unsure = [f"{r['trace']} {r['load']} ({which(r)}{r['backfill']})" for r in unsure]
    text += f" Not distinguishable from it (interval contains 1): {', '.join(unsure) or 'none'}."
    few = sorted({r["trace"] for r in rows if r["windows"] == 2})
    if few:
        text += f" Two windows ({', '.join(few)}): three distinct resamples, a rough interval."
    if single:
        one = [f"{r['trace']} {r['load']} ({which(r)}{r['ratio']:.2f}x)" for r in single]
        text += f" One window, so no interval: {', '.join(one)}."
    return text


def write_readme(path: str, block: str) -> None:
    head, tail = readme_block(Path(path), BEGIN, END)
    with atomic_write(path) as f:
        f.write(f"{head}{BEGIN}\n{block}{END}{tail}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    default = os.environ.get("DDPPO_TRACES", ROOT.parent / "shared" / "traces")
    p.add_argument("--traces", default=str(default), help="folder of *.swf.gz traces")
    p.add_argument("--checkpoint", nargs="+", action="extend", default=[], help="run dirs or .pt")
    p.add_argument("--windows", type=bounded_int(1), help="windows per trace (20; --quick 4)")
    p.add_argument("--jobs", type=bounded_int(1), default=1024, help="jobs per window (1024)")
    p.add_argument("--out", default="runs/quality", help="results folder (runs/quality)")
    p.add_argument("--readme", metavar="FILE", help="replace FILE's quality block")
    p.add_argument("--quick", action="store_true", help="a 2-minute subset (see above)")
    args = p.parse_args(argv)
    args.windows = args.windows or (QUICK["windows"] if args.quick else 20)
    args.backfills = QUICK["backfills"] if args.quick else BACKFILLS
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def trace_files(args) -> list[Path]:
    folder = Path(args.traces)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such trace folder (--traces)")
    files = sorted(folder.glob("*.swf.gz"))
    if args.quick:
        files = [f for f in files if short_name(f) in QUICK["traces"]]
    if not files:
        raise ValueError(f"{folder}: no *.swf.gz traces{' for --quick' * args.quick}")
    return files


def run(args) -> int:
    if args.readme:
        if not args.checkpoint:
            raise ValueError("--readme: the quality block reports on a policy: add --checkpoint")
        readme_block(Path(args.readme), BEGIN, END)  # a README without the block fails now
    files = trace_files(args)
    policies = load_policies(args.checkpoint)
    with output_errors(args.out):
        Path(args.out).mkdir(parents=True, exist_ok=True)
    rows, windows = [], {}
    for path in files:
        trace = read_swf(path)
        factor = LOAD_FACTORS.get(short_name(path))
        if factor is None:
            print(f"{PROG}: {path.name}: no load factor known: native load only", file=sys.stderr)
        for load in [("native", 1.0)] + ([(f"x{factor:g}", factor)] if factor else []):
            rows += [r for r in evaluate_load(trace, path, load, policies, args) if r["summary"]]
        windows[short_name(path)] = rows[-1]["windows"] if rows else 0
    if rows:
        print_summary(rows)
    if args.readme:
        write_readme(args.readme, markdown(rows, policies, args, windows))
    print(f"\nwall time: {time.monotonic() - args.began:.0f} s (from the start, imports excluded)")
    return 0


def scored_split(policies: list[dict]):
    """The checkpoints' data.split (load_policies checked they agree), else the default."""
    return policies[0]["config"].data.split if policies else DEFAULT_SPLIT


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.began = time.monotonic()
    torch.set_num_threads(1)  # small batches: one thread, as evaluate
    try:
        return run(args)
    except (ConfigError, OSError, ValueError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
