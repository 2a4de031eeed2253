"""`python -m ddppo_hpc.analyze`: a Markdown table and PNG plots from an evaluation results
file (docs/results.md), without a screen (matplotlib's Agg backend).

    python -m ddppo_hpc.analyze results.h5 --out docs/results
    python -m ddppo_hpc.analyze results.h5 --published docs/results/published.csv \\
        --readme README.md

Writes into --out (default: beside the results file, its name without .h5): results.md (mean
and 95% t-interval over windows per metric and scheduler, the best mean per backfill in
bold) and bsld_windows.png (per-window average bsld), wait_cdf.png (cumulative wait
distribution), utilization.png (busy processors over time in the first window),
user_bsld.png (per-user average bsld: fairness) and, when the run's metrics.h5 is found,
learning_curve.png. Every input is read and checked before anything is written, and the
outputs (with --readme's block) are replaced together or not at all.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
from pathlib import Path

import h5py
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ddppo_hpc.args import run
from ddppo_hpc.io import atomic_write, output_errors, reason
from ddppo_hpc.results import (
    LOWER_IS_BETTER,
    METRICS,
    SCHEDULER,
    Results,
    read_results,
    rows_of,
    scheduler_label,
    scored_jobs,
)

HEADINGS = {
    "avg_bsld": "avg bsld",
    "avg_wait": "avg wait (s)",
    "utilization": "utilization",
    "jain_user_bsld": "Jain (user bsld)",
}
DIGITS = {"avg_bsld": 2, "avg_wait": 0, "utilization": 3, "jain_user_bsld": 3}
README_BEGIN, README_END = "<!-- results-table:begin -->", "<!-- results-table:end -->"
LEARNING_CURVE = ("update", "episode_bsld")  # the columns of metrics.h5 it needs
LOWER = "lower is better"
TRAINED = "ddppo"  # the trained policy's name in results files
POLICY_COLORS = {TRAINED: 3, "fcfs": 0, "sjf": 1, "wfp3": 2, "unicep": 4, "f1": 5, "sjbf": 6}


def best_rows(summary: dict, metric: str) -> set[int]:
    """Rows holding the best mean of `metric` within their backfill (lowest for bsld and
    wait, highest otherwise); none where every mean is equal."""
    means, best = summary[f"{metric}_mean"], set()
    for backfill in set(summary["backfill"]):
        rows = np.flatnonzero(summary["backfill"] == backfill)
        if np.ptp(means[rows]) == 0:
            continue  # all equal: nothing to single out
        pick = np.min if metric in LOWER_IS_BETTER else np.max
        best |= {int(r) for r in rows if means[r] == pick(means[rows])}
    return best


def read_text(path: str | Path) -> str:
    """A UTF-8 text input; ValueError naming it when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {reason(e)}") from None


def read_published(path: str | None) -> dict[tuple[str, str], tuple[float, str]]:
    """(scheduler, backfill) -> (published avg bsld, source), from a CSV with the columns
    scheduler, backfill, avg_bsld, source."""
    if path is None:
        return {}
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    published = {}
    for line, row in enumerate(rows, start=2):
        try:
            published[row["scheduler"], row["backfill"]] = (float(row["avg_bsld"]), row["source"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}:{line}: needs scheduler, backfill, avg_bsld, source") from e
    return published


def markdown_table(results: Results, published: dict) -> str:
    s = results.summary
    head = ["scheduler", "backfill", "windows", *(HEADINGS[m] for m in METRICS)]
    if published:
        head.append("published avg bsld")
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    best = {m: best_rows(s, m) for m in METRICS}
    for r in range(len(s["policy"])):
        name = scheduler_label(s["policy"][r], s["estimate"][r])
        cells = [name, s["backfill"][r], str(s["windows"][r])]
        for m in METRICS:
            d = DIGITS[m]
            cell = (
                f"{s[m + '_mean'][r]:.{d}f} [{s[m + '_low'][r]:.{d}f}, {s[m + '_high'][r]:.{d}f}]"
            )
            cells.append(f"**{cell}**" if r in best[m] else cell)
        if published:
            value = published.get((name, s["backfill"][r]))
            cells.append(f"{value[0]:.2f}" if value else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def scored(results: Results) -> str:
    """Which jobs the table scores: `Scored: trace, test part: jobs 8000 .. 9999 of 10000
    (split 0.7/0.1/0.2); windows: ...`."""
    a = results.attrs
    how = scored_jobs(json.loads(a["split"]), json.loads(a["window_spec"]))
    return f"Scored: `{Path(a['trace']).name}`, {how}."


def report(results: Results, published: dict) -> str:
    """Which jobs were scored, the table, and notes on what it shows (trace, windows,
    policy, sources, command)."""
    a = results.attrs
    notes = [
        f"Trace `{Path(a['trace']).name}` (sha256 `{a['trace_sha256'][:16]}...`), "
        f"{a['machine_procs']} procs; windows: `{a['window_spec']}`.",
        "Cells: mean over windows [95% Student-t interval of the mean]; bold: the best mean "
        "per backfill (lowest bsld and wait, highest utilization and Jain index). "
        "`+predicted`: backfilling takes EASY++ runtime predictions instead of the requests.",
    ]
    config = json.loads(a["config"])
    if config:
        notes.append(
            f"`ddppo`: the trained policy ({config['policy']['name']}, hidden "
            f"{config['policy']['hidden']}) at update {a['checkpoint_update']} of "
            f"{config['ppo']['updates']}, acting greedily."
        )
    notes += [f"Published: {source}." for source in sorted({s for _, s in published.values()})]
    notes.append(f"Command: `{a['command']}`.")
    body = markdown_table(results, published) + "\n" + "\n".join(f"- {n}" for n in notes)
    return f"{scored(results)}\n\n{body}\n"


def panels(results: Results, title: str, label: str, axis: str = "y") -> tuple[Figure, list]:
    """A figure with one panel per backfill, and its (backfill, axes) pairs; `label` names
    the shared `axis`. Figures are drawn by the Agg canvas: files only, no display or
    pyplot state."""
    backfills = list(dict.fromkeys(results.summary["backfill"]))
    fig = Figure(figsize=(6.5 * len(backfills), 5))
    share = {"sharey": True} if axis == "y" else {"sharex": True}
    axes = fig.subplots(1, len(backfills), squeeze=False, **share)[0]
    fig.suptitle(title)
    (axes[0].set_ylabel if axis == "y" else axes[0].set_xlabel)(label)
    for backfill, ax in zip(backfills, axes):
        ax.set_title(f"backfill: {backfill}")
        ax.grid(alpha=0.3)
    return fig, list(zip(backfills, axes))


def schedulers(results: Results, backfill: str) -> list[tuple[tuple, str]]:
    """((policy, backfill, estimate), label) of each scheduler with `backfill`, in the
    summary's order."""
    s = results.summary
    keys = [k for k in zip(*(s[n] for n in SCHEDULER)) if k[1] == backfill]
    return [(k, scheduler_label(k[0], k[2])) for k in keys]


def best_heuristic(results: Results, backfill: str) -> tuple[tuple, str] | None:
    """The heuristic with the lowest mean avg bsld under `backfill` (None: no heuristic)."""
    s = results.summary
    rows = [r for r in range(len(s["policy"])) if s["backfill"][r] == backfill]
    rows = [r for r in rows if s["policy"][r] != TRAINED]
    if not rows:
        return None
    r = min(rows, key=lambda r: s["avg_bsld_mean"][r])
    return (s["policy"][r], backfill, s["estimate"][r]), scheduler_label(
        s["policy"][r], s["estimate"][r]
    )


def png(fig: Figure) -> bytes:
    fig.tight_layout()
    FigureCanvasAgg(fig)  # the figure draws on the Agg canvas
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    return image.getvalue()


def plot_bsld_windows(results: Results) -> Figure:
    w = results.windows
    title = "Average bounded slowdown per window (box: quartiles; triangle: the table's mean)"
    fig, pairs = panels(results, title, f"window's avg bsld, log scale ({LOWER})")
    for backfill, ax in pairs:
        names = schedulers(results, backfill)
        data = [w["avg_bsld"][rows_of(w, key)] for key, _ in names]
        ax.boxplot(data, tick_labels=[label for _, label in names], showmeans=True)
        ax.tick_params(axis="x", labelrotation=60)
        ax.set_yscale("log")
    return fig


def plot_wait_cdf(results: Results) -> Figure:
    j = results.jobs
    title = "Cumulative wait distribution (dot: the mean wait; dashed: EASY++ predictions)"
    fig, pairs = panels(results, title, "fraction of jobs waiting at most this long")
    for backfill, ax in pairs:
        for index, (key, label) in enumerate(schedulers(results, backfill)):
            hours = np.sort(j["wait"][rows_of(j, key)]) / 3600
            fraction = np.arange(1, len(hours) + 1) / len(hours)
            style = {"color": f"C{POLICY_COLORS.get(key[0], index) % 10}"}
            style["linestyle"] = "-" if key[2] == "request" else "--"
            ax.step(hours, fraction, where="post", label=label, **style)
            mean = hours.mean()
            ax.plot(mean, np.searchsorted(hours, mean, "right") / len(hours), "o", **style)
        ax.set_xscale("symlog", linthresh=1 / 60)  # linear below a minute, log above
        ax.set_xlabel(f"wait (hours; linear below 1 min, log above; {LOWER})")
        ax.legend(fontsize="small", ncols=2)
    return fig


def plot_utilization(results: Results) -> Figure:
    s = results.summary
    title = "Utilization: mean over windows and its 95% interval (as in the table)"
    fig, pairs = panels(results, title, "utilization (higher is better)", axis="x")
    for backfill, ax in pairs:
        names = schedulers(results, backfill)
        rows = [int(np.flatnonzero(rows_of(s, key))[0]) for key, _ in names]
        mean = s["utilization_mean"][rows]
        error = [mean - s["utilization_low"][rows], s["utilization_high"][rows] - mean]
        y = np.arange(len(rows))
        colors = ["C3" if key[0] == TRAINED else "C0" for key, _ in names]  # red: the policy
        ax.barh(y, mean, xerr=error, capsize=3, color=colors, alpha=0.7)
        ax.set_yticks(y, [label for _, label in names])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("utilization (higher is better)")
    return fig


def user_means(jobs: dict, key: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(users, each one's avg bsld over its jobs in every window) of scheduler `key`."""
    chosen = rows_of(jobs, key)
    users, index = np.unique(jobs["user"][chosen], return_inverse=True)
    return users, np.bincount(index, jobs["bsld"][chosen]) / np.bincount(index)


def plot_user_bsld(results: Results) -> Figure:
    j = results.jobs
    title = "Per-user average bounded slowdown (fairness), the same users in every line"
    fig, pairs = panels(results, title, f"user's avg bsld, log scale ({LOWER})")
    for backfill, ax in pairs:
        reference = best_heuristic(results, backfill) or schedulers(results, backfill)[0]
        users, ref = user_means(j, reference[0])
        order = np.argsort(-ref, kind="stable")  # users sorted once, by the reference
        x = np.arange(1, len(users) + 1)
        for key, _ in schedulers(results, backfill):
            if key == reference[0] or key[0] == TRAINED:
                continue
            theirs, means = user_means(j, key)
            assert np.array_equal(theirs, users)  # every scheduler ran the same jobs
            ax.plot(x, means[order], color="0.7", lw=0.8)
        ax.plot([], [], color="0.7", lw=0.8, label="other heuristics")
        ax.plot(x, ref[order], "o-", color="C0", ms=3, label=f"{reference[1]} (best heuristic)")
        for key, label in schedulers(results, backfill):
            if key[0] == TRAINED:
                ax.plot(x, user_means(j, key)[1][order], "s", color="C3", ms=3, label=label)
        ax.set_yscale("log")
        ax.set_xlabel(f"users, sorted by {reference[1]}'s per-user avg bsld ({len(users)} users)")
        ax.legend(fontsize="small")
    return fig


PLOTS = {
    "bsld_windows.png": plot_bsld_windows,
    "wait_cdf.png": plot_wait_cdf,
    "utilization.png": plot_utilization,
    "user_bsld.png": plot_user_bsld,
}


def read_learning_curve(metrics: Path) -> dict[str, np.ndarray]:
    """update, training episodes' avg bsld and, where training logged it, baseline_bsld
    (the reward baseline's on the same windows), from a run's metrics.h5."""
    try:
        with h5py.File(metrics, "r") as f:
            missing = [n for n in LEARNING_CURVE if not isinstance(f.get(n), h5py.Dataset)]
            if missing:
                raise ValueError(f"{metrics}: not a training metrics file: no {', '.join(missing)}")
            names = [*LEARNING_CURVE, *(["baseline_bsld"] if "baseline_bsld" in f else [])]
            curve = {name: f[name][...] for name in names}
    except OSError as e:
        raise ValueError(f"{metrics}: cannot read metrics ({reason(e)})") from None
    if any(c.ndim != 1 or c.shape != curve["update"].shape for c in curve.values()):
        raise ValueError(f"{metrics}: update and episode_bsld are not columns of one table")
    return curve


def trailing_mean(values: np.ndarray, k: int) -> np.ndarray:
    """The mean of each value and the k - 1 before it (fewer at the start), NaNs skipped."""
    finite = np.isfinite(values)
    sums = np.cumsum(np.where(finite, values, 0.0))
    counts = np.cumsum(finite)
    lag = np.arange(len(values)) - k
    before = np.where(lag >= 0, sums[np.maximum(lag, 0)], 0.0)
    counted = counts - np.where(lag >= 0, counts[np.maximum(lag, 0)], 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, (sums - before) / counted, np.nan)


def plot_learning_curve(curve: dict, run: str, results: Results) -> Figure:
    """Training episodes' avg bsld per update, its trailing mean over a twentieth of the run,
    and a heuristic's level: the reward baseline on the same training windows when training
    logged it, else the evaluation's best heuristic (other windows: said in the label)."""
    update, bsld = curve["update"], curve["episode_bsld"]
    k = max(1, len(bsld) // 20)
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    ax.plot(update, bsld, color="C0", alpha=0.3, lw=0.8, label="policy, per update")
    ax.plot(update, trailing_mean(bsld, k), color="C0", label=f"policy, mean of the last {k}")
    baseline = curve.get("baseline_bsld")
    if baseline is not None and np.isfinite(baseline).any():
        env = json.loads(results.attrs["config"]).get("env", {})
        name = f"{env.get('reward_baseline', 'baseline')} + {env.get('backfill', '?')}"
        level = trailing_mean(baseline, k)
        ax.plot(update, level, "--", color="k", label=f"{name}, same windows, mean of {k}")
    else:
        line = evaluation_best(results)
        if line:
            ax.axhline(line[0], ls=":", color="k", label=line[1])
    ax.set_xlabel("update")
    ax.set_ylabel(f"training episodes' avg bsld, log scale ({LOWER})")
    ax.set_yscale("log")
    ax.set_title(f"Learning curve ({run})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def evaluation_best(results: Results) -> tuple[float, str] | None:
    """(mean avg bsld, label) of the evaluation's best heuristic under the training
    backfill, which scores other jobs than training did (another part of the trace)."""
    env = json.loads(results.attrs["config"]).get("env", {})
    best = best_heuristic(results, env.get("backfill", ""))
    if best is None:
        return None
    mean = results.summary["avg_bsld_mean"][rows_of(results.summary, best[0])][0]
    split = json.loads(results.attrs["split"])
    return float(mean), (
        f"{best[1]} + {best[0][1]}: best heuristic of the evaluation "
        f"({split['part']} part, not the training windows)"
    )


def metrics_file(results: Results, given: str | None) -> Path | None:
    """The run's metrics.h5: --metrics, else beside the evaluated checkpoint."""
    if given:
        if not Path(given).is_file():
            raise FileNotFoundError(f"{given}: no such metrics file")
        return Path(given)
    checkpoint = results.attrs.get("checkpoint")
    found = Path(checkpoint).parent / "metrics.h5" if checkpoint else None
    return found if found and found.is_file() else None


def readme_block(readme: Path, begin: str = README_BEGIN, end: str = README_END) -> tuple[str, str]:
    """The README's text before and after its block between the markers `begin` and `end`
    (by default the results table's)."""
    text = read_text(readme)
    if begin not in text or end not in text:
        raise ValueError(f"{readme}: no {begin} ... {end} block to replace")
    head, rest = text.split(begin, 1)
    return head, rest.split(end, 1)[1]


def outputs(args: argparse.Namespace) -> dict[Path, bytes]:
    """Every output file and its contents. Every input is read and checked first: a bad
    one stops the analysis before anything is written."""
    results = read_results(args.results)
    published = read_published(args.published)
    metrics = metrics_file(results, args.metrics)
    curve = read_learning_curve(metrics) if metrics else None
    readme = readme_block(Path(args.readme)) if args.readme else None
    out = Path(args.out or Path(args.results).with_suffix(""))
    body = report(results, published)
    files = {out / "results.md": f"# Evaluation results\n\n{body}".encode()}
    for name, plot in PLOTS.items():
        files[out / name] = png(plot(results))
    if curve is not None:
        files[out / "learning_curve.png"] = png(
            plot_learning_curve(curve, metrics.parent.name, results)
        )
    if readme is not None:
        files[Path(args.readme)] = (
            f"{readme[0]}{README_BEGIN}\n{body}{README_END}{readme[1]}".encode()
        )
    return files


def write_all(files: dict[Path, bytes]) -> None:
    """Writes every file or none: each goes to a temp file, and the temp files are renamed
    only once all are written (a full disk fails at a write or flush, inside the block)."""
    with contextlib.ExitStack() as stack:
        for path, data in files.items():
            with output_errors(path.parent):
                path.parent.mkdir(parents=True, exist_ok=True)
            f = stack.enter_context(atomic_write(path, "wb"))
            f.write(data)
            f.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.analyze",
        description=__doc__.split("`: ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", help="an evaluation results file (python -m ddppo_hpc.evaluate)")
    p.add_argument("--out", metavar="DIR", help="where the table and plots go")
    p.add_argument("--metrics", help="a run's metrics.h5 (default: beside its checkpoint)")
    p.add_argument("--published", metavar="CSV", help="published numbers for the table")
    p.add_argument("--readme", help="a Markdown file whose results-table block is replaced")
    args = p.parse_args(argv)
    try:
        files = outputs(args)
        write_all(files)
    except (OSError, ValueError) as e:
        print(f"python -m ddppo_hpc.analyze: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in files))
    return 0


if __name__ == "__main__":
    run(main)
