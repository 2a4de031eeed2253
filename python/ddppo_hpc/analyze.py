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
learning_curve.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import h5py
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ddppo_hpc.io import atomic_write
from ddppo_hpc.results import LOWER_IS_BETTER, METRICS, Results, read_results

HEADINGS = {
    "avg_bsld": "avg bsld",
    "avg_wait": "avg wait (s)",
    "utilization": "utilization",
    "jain_user_bsld": "Jain (user bsld)",
}
DIGITS = {"avg_bsld": 2, "avg_wait": 0, "utilization": 3, "jain_user_bsld": 3}
README_BEGIN, README_END = "<!-- results-table:begin -->", "<!-- results-table:end -->"


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


def read_published(path: str | None) -> dict[tuple[str, str], tuple[float, str]]:
    """(scheduler, backfill) -> (published avg bsld, source), from a CSV with the columns
    scheduler, backfill, avg_bsld, source."""
    if path is None:
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
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
        cells = [s["policy"][r], s["backfill"][r], str(s["windows"][r])]
        for m in METRICS:
            d = DIGITS[m]
            cell = (
                f"{s[m + '_mean'][r]:.{d}f} [{s[m + '_low'][r]:.{d}f}, {s[m + '_high'][r]:.{d}f}]"
            )
            cells.append(f"**{cell}**" if r in best[m] else cell)
        if published:
            value = published.get((s["policy"][r], s["backfill"][r]))
            cells.append(f"{value[0]:.2f}" if value else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(results: Results, published: dict) -> str:
    """The table and notes on what it shows (trace, windows, policy, sources, command)."""
    a = results.attrs
    notes = [
        f"Trace `{Path(a['trace']).name}` (sha256 `{a['trace_sha256'][:16]}...`), "
        f"{a['machine_procs']} procs; windows: `{a['window_spec']}`.",
        "Cells: mean over windows [95% Student-t interval of the mean]; bold: the best mean "
        "per backfill (lowest bsld and wait, highest utilization and Jain index).",
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
    return markdown_table(results, published) + "\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def panels(results: Results, title: str, ylabel: str) -> tuple[Figure, list]:
    """A figure with one panel per backfill, and its (backfill, axes) pairs. Figures are
    drawn by the Agg canvas: files only, no display or pyplot state."""
    backfills = list(dict.fromkeys(results.summary["backfill"]))
    fig = Figure(figsize=(6 * len(backfills), 4.5))
    axes = fig.subplots(1, len(backfills), squeeze=False, sharey=True)[0]
    fig.suptitle(title)
    axes[0].set_ylabel(ylabel)
    for backfill, ax in zip(backfills, axes):
        ax.set_title(f"backfill: {backfill}")
        ax.grid(alpha=0.3)
    return fig, list(zip(backfills, axes))


def schedulers(results: Results) -> list[str]:
    return list(dict.fromkeys(results.summary["policy"]))


def save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    FigureCanvasAgg(fig)  # the figure draws on the Agg canvas
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)


def plot_bsld_windows(results: Results, path: Path) -> None:
    w, names = results.windows, schedulers(results)
    fig, pairs = panels(results, "Average bounded slowdown per window", "avg bsld")
    for backfill, ax in pairs:
        data = [w["avg_bsld"][(w["policy"] == p) & (w["backfill"] == backfill)] for p in names]
        ax.boxplot(data, tick_labels=names)
        ax.set_yscale("log")
    save(fig, path)


def plot_wait_cdf(results: Results, path: Path) -> None:
    j = results.jobs
    fig, pairs = panels(results, "Cumulative wait distribution", "fraction of jobs")
    for backfill, ax in pairs:
        for p in schedulers(results):
            wait = np.sort(j["wait"][(j["policy"] == p) & (j["backfill"] == backfill)])
            ax.step(wait + 1, np.arange(1, len(wait) + 1) / len(wait), where="post", label=p)
        ax.set_xscale("log")
        ax.set_xlabel("wait + 1 (s)")
        ax.legend()
    save(fig, path)


def busy_fraction(start, end, procs, machine: int, bins: int = 40):
    """(bin centres, mean fraction of busy processors per bin) from job intervals."""
    edges = np.linspace(start.min(), end.max(), bins + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None)
    busy = (overlap * procs).sum(axis=1) / (edges[1] - edges[0]) / machine
    return (lo[:, 0] + hi[:, 0]) / 2, busy


def plot_utilization(results: Results, path: Path) -> None:
    j, machine = results.jobs, results.attrs["machine_procs"]
    title = "Busy processors over time (window 0)"
    fig, pairs = panels(results, title, "fraction of the machine")
    for backfill, ax in pairs:
        for p in schedulers(results):
            chosen = (j["policy"] == p) & (j["backfill"] == backfill) & (j["window"] == 0)
            origin = j["submit"][chosen].min()
            t, busy = busy_fraction(
                j["start"][chosen], j["end"][chosen], j["procs"][chosen], machine
            )
            ax.plot((t - origin) / 3600, busy, label=p)
        ax.set_xlabel("hours since the window's first submit")
        ax.legend(loc="lower center", ncols=3, fontsize="small")
    save(fig, path)


def plot_user_bsld(results: Results, path: Path) -> None:
    j = results.jobs
    title = "Per-user average bounded slowdown (fairness), users sorted"
    fig, pairs = panels(results, title, "user's avg bsld")
    for backfill, ax in pairs:
        for p in schedulers(results):
            chosen = (j["policy"] == p) & (j["backfill"] == backfill)
            users, index = np.unique(j["user"][chosen], return_inverse=True)
            means = np.bincount(index, j["bsld"][chosen]) / np.bincount(index)
            ax.plot(np.arange(1, len(users) + 1), np.sort(means)[::-1], marker=".", label=p)
        ax.set_yscale("log")
        ax.set_xlabel("user rank")
        ax.legend()
    save(fig, path)


def plot_learning_curve(metrics: Path, path: Path) -> None:
    with h5py.File(metrics, "r") as f:
        update, bsld = f["update"][...], f["episode_bsld"][...]
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    ax.plot(update, bsld, alpha=0.4, label="per update")
    k = len(bsld) // 20  # a moving average over a twentieth of the run
    if k > 1:
        smooth = np.convolve(np.nan_to_num(bsld, nan=np.nanmean(bsld)), np.ones(k) / k, "valid")
        ax.plot(update[k - 1 :], smooth, label=f"mean of {k} updates")
    ax.set_xlabel("update")
    ax.set_ylabel("training episodes' avg bsld")
    ax.set_yscale("log")
    ax.set_title(f"Learning curve ({metrics.parent.name})")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)


def metrics_file(results: Results, given: str | None) -> Path | None:
    """The run's metrics.h5: --metrics, else beside the evaluated checkpoint."""
    if given:
        if not Path(given).is_file():
            raise FileNotFoundError(f"{given}: no such metrics file")
        return Path(given)
    checkpoint = results.attrs.get("checkpoint")
    found = Path(checkpoint).parent / "metrics.h5" if checkpoint else None
    return found if found and found.is_file() else None


def update_readme(readme: Path, body: str) -> None:
    """Replaces the README's block between the results-table markers with `body`."""
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{readme}: no {README_BEGIN} ... {README_END} block to replace")
    head, rest = text.split(README_BEGIN, 1)
    tail = rest.split(README_END, 1)[1]
    with atomic_write(readme) as f:
        f.write(f"{head}{README_BEGIN}\n{body}{README_END}{tail}")


def analyze(args: argparse.Namespace) -> list[Path]:
    results = read_results(args.results)
    published = read_published(args.published)
    out = Path(args.out or Path(args.results).with_suffix(""))
    out.mkdir(parents=True, exist_ok=True)
    body = report(results, published)
    with atomic_write(out / "results.md") as f:
        f.write("# Evaluation results\n\n" + body)
    plots = {
        "bsld_windows.png": plot_bsld_windows,
        "wait_cdf.png": plot_wait_cdf,
        "utilization.png": plot_utilization,
        "user_bsld.png": plot_user_bsld,
    }
    for name, plot in plots.items():
        plot(results, out / name)
    written = [out / "results.md", *(out / name for name in plots)]
    metrics = metrics_file(results, args.metrics)
    if metrics is not None:
        plot_learning_curve(metrics, out / "learning_curve.png")
        written.append(out / "learning_curve.png")
    if args.readme:
        update_readme(Path(args.readme), body)
    return written


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
        written = analyze(args)
    except (OSError, ValueError) as e:
        print(f"python -m ddppo_hpc.analyze: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
