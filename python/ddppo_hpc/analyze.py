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

from ddppo_hpc.io import atomic_write, output_errors, reason
from ddppo_hpc.results import LOWER_IS_BETTER, METRICS, Results, read_results

HEADINGS = {
    "avg_bsld": "avg bsld",
    "avg_wait": "avg wait (s)",
    "utilization": "utilization",
    "jain_user_bsld": "Jain (user bsld)",
}
DIGITS = {"avg_bsld": 2, "avg_wait": 0, "utilization": 3, "jain_user_bsld": 3}
README_BEGIN, README_END = "<!-- results-table:begin -->", "<!-- results-table:end -->"
LEARNING_CURVE = ("update", "episode_bsld")  # the columns of metrics.h5 it plots


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


def png(fig: Figure) -> bytes:
    fig.tight_layout()
    FigureCanvasAgg(fig)  # the figure draws on the Agg canvas
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    return image.getvalue()


def plot_bsld_windows(results: Results) -> Figure:
    w, names = results.windows, schedulers(results)
    fig, pairs = panels(results, "Average bounded slowdown per window", "avg bsld")
    for backfill, ax in pairs:
        data = [w["avg_bsld"][(w["policy"] == p) & (w["backfill"] == backfill)] for p in names]
        ax.boxplot(data, tick_labels=names)
        ax.set_yscale("log")
    return fig


def plot_wait_cdf(results: Results) -> Figure:
    j = results.jobs
    fig, pairs = panels(results, "Cumulative wait distribution", "fraction of jobs")
    for backfill, ax in pairs:
        for p in schedulers(results):
            wait = np.sort(j["wait"][(j["policy"] == p) & (j["backfill"] == backfill)])
            ax.step(wait + 1, np.arange(1, len(wait) + 1) / len(wait), where="post", label=p)
        ax.set_xscale("log")
        ax.set_xlabel("wait + 1 (s)")
        ax.legend()
    return fig


def busy_fraction(start, end, procs, machine: int, bins: int = 40):
    """(bin centres, mean fraction of busy processors per bin) from job intervals."""
    edges = np.linspace(start.min(), end.max(), bins + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None)
    busy = (overlap * procs).sum(axis=1) / (edges[1] - edges[0]) / machine
    return (lo[:, 0] + hi[:, 0]) / 2, busy


def plot_utilization(results: Results) -> Figure:
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
    return fig


def plot_user_bsld(results: Results) -> Figure:
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
    return fig


PLOTS = {
    "bsld_windows.png": plot_bsld_windows,
    "wait_cdf.png": plot_wait_cdf,
    "utilization.png": plot_utilization,
    "user_bsld.png": plot_user_bsld,
}


def read_learning_curve(metrics: Path) -> tuple[np.ndarray, np.ndarray]:
    """(update, training episodes' avg bsld) from a run's metrics.h5."""
    try:
        with h5py.File(metrics, "r") as f:
            missing = [n for n in LEARNING_CURVE if not isinstance(f.get(n), h5py.Dataset)]
            if missing:
                raise ValueError(f"{metrics}: not a training metrics file: no {', '.join(missing)}")
            update, bsld = (f[name][...] for name in LEARNING_CURVE)
    except OSError as e:
        raise ValueError(f"{metrics}: cannot read metrics ({reason(e)})") from None
    if update.ndim != 1 or update.shape != bsld.shape:
        raise ValueError(f"{metrics}: update and episode_bsld are not columns of one table")
    return update, bsld


def plot_learning_curve(update: np.ndarray, bsld: np.ndarray, run: str) -> Figure:
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
    ax.set_title(f"Learning curve ({run})")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def metrics_file(results: Results, given: str | None) -> Path | None:
    """The run's metrics.h5: --metrics, else beside the evaluated checkpoint."""
    if given:
        if not Path(given).is_file():
            raise FileNotFoundError(f"{given}: no such metrics file")
        return Path(given)
    checkpoint = results.attrs.get("checkpoint")
    found = Path(checkpoint).parent / "metrics.h5" if checkpoint else None
    return found if found and found.is_file() else None


def readme_block(readme: Path) -> tuple[str, str]:
    """The README's text before and after its results-table block."""
    text = read_text(readme)
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{readme}: no {README_BEGIN} ... {README_END} block to replace")
    head, rest = text.split(README_BEGIN, 1)
    return head, rest.split(README_END, 1)[1]


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
        files[out / "learning_curve.png"] = png(plot_learning_curve(*curve, metrics.parent.name))
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
    raise SystemExit(main())
