"""Job logs into the HDF5 trace store: SWF logs, the Philly and Alibaba GPU traces, and the
embedded synthetic workload."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddppo_hpc.data import gpu, synthetic
from ddppo_hpc.data.store import CHUNK_ROWS, CORE_COLUMNS, sha256_of
from ddppo_hpc.data.swf import INTEGER_COLUMNS, SWF_COLUMNS, log_cleaning, parse_swf, read_bytes
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.data.writer import StoreWriter, check_output
from ddppo_hpc.progress import Progress

# An SWF store keeps all 18 fields (SWF_COLUMNS), the contract's derived `procs` and
# `requested_time`, and the index of the input file each job came from.
SWF_STORE_COLUMNS = {
    **{name: np.int64 if name in INTEGER_COLUMNS else np.float64 for name in SWF_COLUMNS},
    "procs": np.int32,
    "requested_time": np.float64,
    "source": np.int32,
}
_HEADERS = {
    "timestamp,duration,num_gpus": "philly",
    "name,cpu_milli,memory_mib,num_gpu": "alibaba_pods",
    "sn,cpu_milli,memory_mib,gpu": "alibaba_nodes",
}


def input_kind(path: str | Path) -> str:
    """`swf`, `philly`, `alibaba_pods` or `alibaba_nodes`, from the file's first line."""
    first = read_bytes(path, limit=4096).decode("utf-8", errors="replace")
    for prefix, kind in _HEADERS.items():
        if first.startswith(prefix):
            return kind
    return "swf"


def _swf_source(path: Path, index: int, machine_procs: int | None, skip_bad: bool):
    """The cleaned, ordered store columns of one SWF log, and its manifest entry."""
    log = parse_swf(path, skip_bad)
    c = log_cleaning(log, machine_procs)
    columns = {name: values[c.order] for name, values in log.columns.items()}
    columns["procs"] = c.procs[c.order].astype(np.int32)
    columns["requested_time"] = c.requested_time[c.order]
    columns["source"] = np.full(len(c.order), index, dtype=np.int32)
    entry = {
        "file": str(path),
        "sha256": sha256_of(path),
        "header": log.header,
        "machine_procs": c.machine_procs,
        "jobs": len(c.order),
        "dropped": dict(c.dropped, bad_line=log.skipped),
    }
    return columns, entry


def convert_swf(
    inputs: list[Path],
    out_dir: Path,
    partitions: int = 1,
    machine_procs: int | None = None,
    skip_bad: bool = False,
    force: bool = False,
) -> dict:
    """SWF logs into one store, each later log shifted to start 1 s after the previous ends
    (its last submit): a long history from pieces. Returns the manifest."""
    pieces, sources = [], []
    for index, path in enumerate(inputs):
        columns, entry = _swf_source(Path(path), index, machine_procs, skip_bad)
        shift = 0.0
        if pieces:
            shift = pieces[-1]["submit"][-1] + 1 - columns["submit"][0]
            columns["submit"] = columns["submit"] + shift
        entry["time_shift"] = float(shift)
        pieces.append(columns)
        sources.append(entry)
    merged = {name: np.concatenate([p[name] for p in pieces]) for name in SWF_STORE_COLUMNS}
    dropped = {
        reason: sum(s["dropped"][reason] for s in sources) for reason in sources[0]["dropped"]
    }
    machine = {"kind": "procs", "procs": max(s["machine_procs"] for s in sources)}
    return _write(
        merged,
        out_dir,
        partitions,
        SWF_STORE_COLUMNS,
        force,
        inputs,
        kind="swf",
        machine=machine,
        sources=sources,
        dropped=dropped,
    )


def convert_gpu(
    inputs: list[Path],
    out_dir: Path,
    partitions: int = 1,
    machine_procs: int | None = None,
    skip_bad: bool = False,
    force: bool = False,
) -> dict:
    """The Philly job CSV, or the Alibaba pod CSV with its node CSV, into a store."""
    kinds = {input_kind(p): Path(p) for p in inputs}
    if set(kinds) == {"philly"} and len(inputs) == 1:
        trace = gpu.read_philly(kinds["philly"], skip_bad=skip_bad, machine_gpus=machine_procs)
    elif set(kinds) == {"alibaba_pods", "alibaba_nodes"} and len(inputs) == 2:
        trace = gpu.read_alibaba(kinds["alibaba_pods"], kinds["alibaba_nodes"], skip_bad=skip_bad)
    else:
        names = ", ".join(f"{p} ({input_kind(p)})" for p in inputs)
        raise TraceError(
            f"cannot combine {names}: give one Philly job CSV, or an Alibaba pod CSV with "
            "its node CSV"
        )
    dtypes = {name: values.dtype.type for name, values in trace.columns.items()}
    sources = [{"file": str(p), "sha256": sha256_of(p)} for p in inputs]
    machine = dict(trace.machine, procs=int(trace.machine["gpus"]))
    return _write(
        trace.columns,
        out_dir,
        partitions,
        dtypes,
        force,
        inputs,
        kind=trace.meta["kind"],
        machine=machine,
        sources=sources,
        dropped=trace.dropped,
        meta=trace.meta,
    )


def convert(inputs: list[Path], out_dir: Path, **options) -> dict:
    """Any supported logs into a store: SWF logs, or a GPU trace. The output is checked
    first (`check_output`), before the inputs are read."""
    check_output(Path(out_dir), options.get("force", False), inputs)
    if all(input_kind(p) == "swf" for p in inputs):
        return convert_swf(inputs, out_dir, **options)
    return convert_gpu(inputs, out_dir, **options)


def _write(
    columns: dict[str, np.ndarray],
    out_dir: Path,
    partitions: int,
    dtypes: dict,
    force: bool,
    inputs: list[Path],
    **manifest,
) -> dict:
    jobs = len(columns["id"])
    progress = Progress(f"writing {out_dir}", jobs, "jobs")
    with StoreWriter(out_dir, jobs, partitions, dtypes, force, inputs) as writer:
        for start in range(0, jobs, 16 * CHUNK_ROWS):
            writer.append(
                {name: values[start : start + 16 * CHUNK_ROWS] for name, values in columns.items()}
            )
            progress.update(min(jobs, start + 16 * CHUNK_ROWS))
        writer.finish(**manifest)
    progress.done()
    return writer.manifest


def generate(
    out_dir: Path,
    jobs: int,
    machine_procs: int = 256,
    users: int = 64,
    partitions: int = 1,
    seed: int = 0,
    force: bool = False,
) -> dict:
    """The synthetic multi-user workload, written chunk by chunk: memory stays bounded."""
    progress = Progress(f"generating {out_dir}", jobs, "jobs")
    with StoreWriter(out_dir, jobs, partitions, CORE_COLUMNS, force) as writer:
        for chunk in synthetic.generate_chunks(jobs, machine_procs, users, seed):
            writer.append(chunk)
            progress.update(writer.written)
        writer.finish(
            kind="synthetic",
            machine={"kind": "procs", "procs": machine_procs},
            sources=[
                {
                    "generator": "lublin-feitelson multi-user",
                    "jobs": jobs,
                    "users": users,
                    "seed": seed,
                }
            ],
            dropped={"negative_runtime": 0, "no_procs": 0, "too_large": 0},
        )
    progress.done()
    return writer.manifest
