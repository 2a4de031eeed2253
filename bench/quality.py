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
wait with their 95% t-intervals over windows, and each policy's paired ratio, with a 95%
paired bootstrap interval, to three heuristic rows on the test windows:

- the best heuristic: the lowest mean avg bsld of the 24 on these very windows, an oracle
  (chosen on the jobs it is scored on; the issue's bar);
- the validation rule: the row with the lowest mean avg bsld on the validation part's
  windows (the same spec from the validation part's first job, the same load), the rule a
  site would run had it chosen per trace and load on past jobs;
- the one rule: the row with the lowest geometric mean, over every trace and load
  evaluated, of its mean avg bsld / that set's lowest on the validation windows.

It writes <out>/<trace>-<load>.h5 and the heuristics' validation runs
<out>/<trace>-<load>-validation.h5 (the evaluate schema; `python -m ddppo_hpc.analyze FILE`
reads them; with several checkpoints, one test file per checkpoint:
<trace>-<load>-ckpt<k>.h5) and ends with a summary table (--readme: in Markdown between the
quality markers of FILE).

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

--quick: HPC2N and KTH-SP2, 4 test and validation windows, EASY only, both loads (3 s here;
the whole run 29 s, imports excluded).
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


def part_windows(trace, fractions, part: str, windows: int, jobs: int) -> tuple[list, dict, dict]:
    """(first job, jobs) of every window in `part` (test or validation), the window spec and
    the part (the `split` attribute, as evaluate writes it); ValueError when it is empty."""
    first, stop = part_range(len(trace), fractions, part)
    split = {"part": part, "fractions": list(fractions), "first_job": first, "stop_job": stop}
    split["trace_jobs"] = len(trace)
    if stop == first:
        raise ValueError(f"{trace.source}: nothing to score in the {in_words(split)}")
    spans = protocol_windows(stop, first, windows, jobs)
    if stop - first <= jobs:
        spec = {"kind": "full", "jobs": stop - first, "start": first}
    else:
        spec = {"kind": "consecutive", "windows": len(spans), "jobs": jobs, "start": first}
    return spans, spec, split


def in_words(split: dict) -> str:
    """`test part: jobs 8000 .. 9999 of 10000 (split 0.7/0.1/0.2)` of a `split` attribute."""
    bounds = (split["first_job"], split["stop_job"], split["trace_jobs"])
    return describe(split["part"], *bounds, split["fractions"])


def load_setup(trace, part: str, factor: float, fractions, args) -> tuple[dict, dict, dict]:
    """evaluate.run_rank's setup (no model) for the windows of `part` of `trace` with
    submit times x `factor`, their window spec (with the load factor) and the part."""
    scaled = at_load(trace, factor)
    spans, spec, split = part_windows(scaled, fractions, part, args.windows, args.jobs)
    setup = {"trace": scaled, "spans": spans, "model": None, "env": None}
    return setup, {**spec, "load_factor": factor}, split


def heuristics(args) -> list[tuple]:
    """Every heuristic row: order x backfill of --quick or not x estimate."""
    return schedulers(list(POLICIES), list(args.backfills), list(ESTIMATES))


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


def heuristic_means(summary: dict) -> dict[tuple, float]:
    """(policy, backfill, estimate) -> mean avg bsld of every heuristic row of a summary."""
    keys = zip(*(summary[name] for name in ("policy", "backfill", "estimate")))
    means = zip(keys, summary["avg_bsld_mean"])
    return {tuple(map(str, key)): float(mean) for key, mean in means if key[0] != TRAINED}


def best_heuristic(means: dict) -> tuple:
    """The row of lowest value in `means` (the first of a tie): on the test windows' means the
    best heuristic, on the validation windows' the validation rule, on rule_scores the one
    rule."""
    return min(means, key=means.__getitem__)


def rule_scores(sets: list[dict]) -> dict:
    """Each row's geometric mean over `sets` (each: row -> mean avg bsld on one trace and
    load) of its mean / that set's lowest mean."""
    lowest = [min(means.values()) for means in sets]
    logs = {key: [np.log(means[key] / low) for means, low in zip(sets, lowest)] for key in sets[0]}
    return {key: float(np.exp(np.mean(values))) for key, values in logs.items()}


def window_values(results, key: tuple, metric: str = "avg_bsld") -> np.ndarray:
    """Scheduler row `key`'s per-window `metric` (avg bsld unless named), in window order."""
    w = results.windows
    chosen = rows_of(w, key)
    return w[metric][chosen][np.argsort(w["window"][chosen])]


ORACLE = "best heuristic"


def ratio_rows(results, policy: dict, backfills, where: dict, rules: dict) -> list[dict]:
    """One row per backfill of the policy: its mean avg bsld and, in "vs", its paired ratio
    on the same windows to the best heuristic and to each row of `rules` (name -> row);
    "summary" marks the one the summary shows: the policy under its training backfill (the
    first of `backfills` when that is not among them)."""
    trained = policy["config"].env.backfill
    shown = trained if trained in backfills else backfills[0]
    rules = {ORACLE: best_heuristic(heuristic_means(results.summary)), **rules}
    rows = []
    for trained_row in schedulers([TRAINED], backfills, [], policy["config"].env.estimate):
        backfill, mine = trained_row[1], window_values(results, trained_row)
        vs = {name: versus(mine, results, rule) for name, rule in rules.items()}
        rows.append({**where, "checkpoint": policy["path"], "backfill": backfill, "vs": vs})
        rows[-1].update(bsld=float(mine.mean()), windows=len(mine), summary=backfill == shown)
        rows[-1].update(means(results, trained_row))
    return rows


def means(results, key: tuple) -> dict:
    """Scheduler row `key`'s mean avg wait and utilization over the windows."""
    return {m: float(window_values(results, key, m).mean()) for m in ("avg_wait", "utilization")}


def versus(mine: np.ndarray, results, rule: tuple) -> dict:
    """The paired ratio of per-window avg bsld `mine` to heuristic row `rule`'s in `results`,
    with that row's mean avg bsld, avg wait and utilization."""
    base = window_values(results, rule)
    ratio, low, high = paired_ratio(mine, base)
    vs = {"rule": rule, "bsld": float(base.mean()), "ratio": ratio, "low": low, "high": high}
    return vs | means(results, rule)


def ratio_text(vs: dict) -> str:
    return f"{vs['ratio']:.3f} {interval(vs)}"


def rule_label(rule: tuple) -> str:
    policy, backfill, estimate = rule
    return f"{scheduler_label(policy, estimate)} + {backfill}"


def verdict(vs: dict) -> str:
    return "n/a" if vs["high"] is None else ("yes" if vs["high"] < 1 else "no")


def validate_load(s: dict, args) -> dict:
    """The heuristics on the validation windows of set `s`: writes
    <out>/<trace>-<load>-validation.h5, prints its lowest row; returns every row's mean."""
    setup, spec, split = s["validation"]
    outcomes = run_schedulers(setup, heuristics(args), f"{s['name']} {s['load']}: validation")
    attrs = attributes(None, s["trace"], s["path"], spec, split, args)
    results = results_of(outcomes, setup["trace"], attrs)
    file = Path(args.out) / f"{s['name']}-{s['load']}-validation.h5"
    write_results(file, results)
    means = heuristic_means(results.summary)
    rule = best_heuristic(means)
    print(
        f"{s['name']} {s['load']}: validation rule {rule_label(rule)} (mean avg bsld "
        f"{means[rule]:.2f} on the {in_words(split)}, {len(setup['spans'])} window(s) of up "
        f"to {args.jobs} jobs; results: {file})",
        flush=True,
    )
    return means


def evaluate_load(s: dict, policies, args, rules: dict) -> list[dict]:
    """Every scheduler on the test windows of set `s`: prints the table and the ratios to
    the best heuristic and the rows of `rules`, writes the results file(s); returns the
    ratio rows."""
    (setup, spec, split), label = s["test"], f"{s['name']} {s['load']}"
    began = time.monotonic()
    outcomes = run_schedulers(setup, heuristics(args), f"{label}: heuristics")
    title = f"== {s['name']}, {s['load']} load (submit times x {s['factor']:g}): "
    title += f"{in_words(split)}; {len(setup['spans'])} window(s) of up to {args.jobs} jobs"
    rows, files = [], []
    for k, policy in enumerate(policies or [None]):
        mine = []
        if policy:
            trained = {**setup, "model": policy["model"], "env": policy["config"].env}
            own = schedulers([TRAINED], list(args.backfills), [], policy["config"].env.estimate)
            mine = run_schedulers(trained, own, f"{label}: {policy['path']}")
        attrs = attributes(policy, s["trace"], s["path"], spec, split, args)
        results = results_of(mine + outcomes, setup["trace"], attrs)
        suffix = f"-ckpt{k}" if len(policies) > 1 else ""
        files.append(Path(args.out) / f"{s['name']}-{s['load']}{suffix}.h5")
        write_results(files[-1], results)
        whole = spec["kind"] == "full"
        print_table(results, title + (f" ({policy['path']})" if policy else ""), whole)
        if policy:
            where = {"trace": s["name"], "load": s["load"]}
            rows += ratio_rows(results, policy, args.backfills, where, rules)
    print_ratios(rows)
    print(f"results: {', '.join(str(f) for f in files)}", flush=True)
    took = time.monotonic() - began
    windows = len(setup["spans"])
    print(f"{PROG}: {label}: {windows} windows, {took:.1f} s", file=sys.stderr, flush=True)
    return rows


def print_ratios(rows: list[dict]) -> None:
    for row in rows:
        for name, vs in row["vs"].items():
            print(
                f"{row['checkpoint']} ({row['backfill']}) / {name} {rule_label(vs['rule'])} "
                f"({vs['bsld']:.2f}): {ratio_text(vs)}"
            )


SUMMARY_HEAD = "trace|load|checkpoint|policy backfill|best heuristic|its avg bsld|policy avg bsld"
SUMMARY_HEAD = (*SUMMARY_HEAD.split("|"), "ratio", "95% interval", "upper < 1")
SUMMARY_HEAD += ("wait ratio", "utilization points")
SUMMARY_HEAD += ("validation rule", "vs validation rule", "one rule", "vs one rule")
HONEST = ("validation rule", "one rule")  # the baselines chosen on the validation windows


def summary_cells(row: dict) -> list[str]:
    oracle = row["vs"][ORACLE]
    cells = [row[k] for k in ("trace", "load", "checkpoint", "backfill")]
    cells += [rule_label(oracle["rule"]), f"{oracle['bsld']:.2f}", f"{row['bsld']:.2f}"]
    cells += [f"{oracle['ratio']:.3f}", interval(oracle), verdict(oracle)]
    wait = row["avg_wait"] / oracle["avg_wait"] if oracle["avg_wait"] else float("nan")
    cells += [f"{wait:.2f}", f"{100 * (row['utilization'] - oracle['utilization']):+.1f}"]
    for name in HONEST:
        vs = row["vs"][name]
        cells += [rule_label(vs["rule"]), ratio_text(vs)]
    return cells


def interval(vs: dict) -> str:
    return "n/a (1 window)" if vs["low"] is None else f"[{vs['low']:.3f}, {vs['high']:.3f}]"


def print_summary(rows: list[dict]) -> None:
    table = [list(SUMMARY_HEAD)] + [summary_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) + 2 for i in range(len(SUMMARY_HEAD))]
    print(
        "\nSummary: each policy under its training backfill; ratio = its mean avg bsld / the "
        "best heuristic's (the lowest on these windows); wait ratio and utilization points: "
        "its mean avg wait / that heuristic's and its mean utilization minus that heuristic's "
        "(percentage points); vs validation rule, vs one rule: the "
        "same ratio to the row chosen on the validation windows (per trace and load / one "
        "for all), same windows; 95% paired bootstrap interval (rough with 2 windows)"
    )
    for line in table:
        print("".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def markdown(rows: list[dict], policies: list[dict], args, windows: dict) -> str:
    align = "|---|---|---|---|---|" + "---:|" * 7 + "---|---:|" * len(HONEST)
    lines = ["| " + " | ".join(SUMMARY_HEAD) + " |", align]
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
    options = (
        "history",
        "heuristic_ranks",
        "order_picks",
        "order_actions",
        "action_backfills",
        "fit_times",
        "agent_backfill",
        "wait",
    )
    words = ["dense"] * env.dense_reward + [name for name in options if getattr(env, name)]
    if env.reward_baseline != "none":
        words.append(f"relative to {env.reward_baseline}")
    if ppo.imitation_updates:
        teacher = TEACHER_WORDS.get(env.teacher, "its order")
        if env.teacher_jobs:
            teacher = f"the best heuristic on the {env.teacher_jobs} jobs from each episode's start"
        how = " (DAgger: the policy acting)" if ppo.imitation_rollout == "policy" else ""
        words.append(f"{ppo.imitation_updates} updates copying {teacher}{how}")
    return "".join(f", {w}" for w in words)


ESTIMATE_WORDS = {"request": "users' requests", "predicted": "EASY++ predictions"}
TEACHER_WORDS = {"best": "the best heuristic of each window", "rollout": "the rollout teacher"}


def paragraph(rows: list[dict], policies: list[dict], args, windows: dict) -> str:
    """Which policies, trained how, against which baselines, on which jobs, and where the
    policy loses."""
    scored = ", ".join(f"{name} {n}" for name, n in windows.items())
    unsure = [r for r in rows if r["vs"][ORACLE]["high"] is not None]
    unsure = [r for r in unsure if r["vs"][ORACLE]["low"] <= 1 <= r["vs"][ORACLE]["high"]]
    single = [r for r in rows if r["vs"][ORACLE]["high"] is None]
    higher = " / ".join(sorted({r["load"] for r in rows} - {"native"}))
    text = (
        f"Policies: {'; '.join(trained_how(p) for p in policies)}, acting greedily and "
        f"backfilling as they trained. {baselines(rows, policies, args)} Jobs scored: the "
        f"test part of each trace (the last {scored_split(policies)[2]:g} of its jobs in "
        f"submit order), up to {args.windows} consecutive windows of {args.jobs} jobs "
        f"({scored} windows), at native load and at a higher one (submit times {higher}). "
        "Ratios: the policy's mean avg bsld / the baseline's on the same windows, with a 95% "
        "paired bootstrap interval over windows; wait ratio: its mean avg wait / the best "
        "heuristic's; utilization points: its mean utilization minus the best heuristic's, "
        "in percentage points."
    )
    which = (lambda r: f"{r['checkpoint']}, ") if len(policies) > 1 else (lambda r: "")
    text += f" The policy is worse than the best heuristic on: {losses(rows, ORACLE, which)}."
    unsure = [f"{r['trace']} {r['load']} ({which(r)}{r['backfill']})" for r in unsure]
    text += f" Not distinguishable from it (interval contains 1): {', '.join(unsure) or 'none'}."
    text += f" Worse than the validation rule on: {losses(rows, 'validation rule', which)};"
    text += f" than the one rule on: {losses(rows, 'one rule', which)}."
    few = sorted({r["trace"] for r in rows if r["windows"] == 2})
    if few:
        text += f" Two windows ({', '.join(few)}): three distinct resamples, a rough interval."
    if single:
        one = [
            f"{r['trace']} {r['load']} ({which(r)}{r['vs'][ORACLE]['ratio']:.2f}x)" for r in single
        ]
        text += f" One window, so no interval: {', '.join(one)}."
    return text


def baselines(rows: list[dict], policies: list[dict], args) -> str:
    """The heuristic rows and the three the policy is compared with, in words."""
    sets = len({(r["trace"], r["load"]) for r in rows})
    one = rule_label(rows[0]["vs"]["one rule"]["rule"])
    return (
        f"Baselines: fcfs, sjf, wfp3, unicep, f1 and sjbf x {' and '.join(args.backfills)} "
        "backfilling x the requests or EASY++ predictions as runtime estimates. The best "
        "heuristic is the row with the lowest mean avg bsld on the same windows, an oracle "
        "chosen on the jobs it is scored on; the validation rule, per trace and load, the row "
        "with the lowest on the validation part's windows (the "
        f"{scored_split(policies)[1]:g} of the jobs before the test part, up to {args.windows} "
        f"windows of {args.jobs} jobs, same load); the one rule ({one}), the single row of "
        f"lowest geometric mean over the {sets} trace/load sets of its validation mean / the "
        "set's lowest: what a site that chose its rule on past jobs would run."
    )


def losses(rows: list[dict], baseline: str, which) -> str:
    """The sets where the policy is worse than `baseline` (interval above 1), in words."""
    vs = [(r, r["vs"][baseline]) for r in rows if r["vs"][baseline]["high"] is not None]
    worse = [f"{r['trace']} {r['load']} ({which(r)}{r['backfill']}, {v['ratio']:.2f}x)"
             for r, v in vs if v["low"] > 1]  # fmt: skip
    return ", ".join(worse) or "none"


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
    sets = scored_sets(files, scored_split(policies), args)
    with output_errors(args.out):
        Path(args.out).mkdir(parents=True, exist_ok=True)
    validated = [validate_load(s, args) for s in sets]
    scores = rule_scores(validated)
    one = best_heuristic(scores)
    print(
        f"\none rule: {rule_label(one)} (geometric mean over the {len(sets)} trace/load sets "
        f"of its validation mean avg bsld / the set's lowest: {scores[one]:.3f})"
    )
    rows, windows = [], {}
    for s, means in zip(sets, validated):
        rules = {"validation rule": best_heuristic(means), "one rule": one}
        rows += [r for r in evaluate_load(s, policies, args, rules) if r["summary"]]
        windows[s["name"]] = rows[-1]["windows"] if rows else 0
    if rows:
        print_summary(rows)
    if args.readme:
        write_readme(args.readme, markdown(rows, policies, args, windows))
    print(f"\nwall time: {time.monotonic() - args.began:.0f} s (from the start, imports excluded)")
    return 0


def scored_sets(files: list[Path], fractions, args) -> list[dict]:
    """Every trace at every load, with its test and validation windows (load_setup), all
    checked before anything runs."""
    sets = []
    for path in files:
        trace = read_swf(path)
        for load, factor in loads(path):
            s = {"name": short_name(path), "load": load, "factor": factor}
            s.update(path=path, trace=trace)
            for part in ("test", "validation"):
                s[part] = load_setup(trace, part, factor, fractions, args)
            sets.append(s)
    return sets


def loads(path: Path) -> list[tuple[str, float]]:
    """("native", 1) and the higher load of LOAD_FACTORS, when the trace has one."""
    factor = LOAD_FACTORS.get(short_name(path))
    if factor is None:
        print(f"{PROG}: {path.name}: no load factor known: native load only", file=sys.stderr)
        return [("native", 1.0)]
    return [("native", 1.0), (f"x{factor:g}", factor)]


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
