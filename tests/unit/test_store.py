"""The HDF5 trace store: convert, layout, streaming, episodes, bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from ddppo_hpc.data import convert, read_swf
from ddppo_hpc.data.cli import main as data_main
from ddppo_hpc.data.sampler import EpisodeSampler
from ddppo_hpc.data.store import CORE_COLUMNS, TraceStore
from ddppo_hpc.data.swf import SWF_COLUMNS
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.data.writer import StoreWriter
from ddppo_hpc.sim import simulate


def swf_text(rows, header="; MaxProcs: 8\n"):
    lines = []
    for i, submit, runtime, procs, request in rows:
        f = [i, submit, 3, runtime, procs, 1.5, -1, procs, request, -1, 1, i % 3, 2, 7, 1]
        lines.append(" ".join(map(str, [*f, -1, -1, -1])))
    return header + "\n".join(lines) + "\n"


ROWS = [(1, 0, 10, 4, 20), (2, 5, 3, 2, -1), (3, 5, -1, 2, 5), (4, 9, 30, 9, 40),
        (5, 12, 7, 8, 7), (6, 20, 1, 1, 1), (7, 21, 4, 3, 10)]  # fmt: skip


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log.swf"
    path.write_text(swf_text(ROWS))
    return path


def test_convert_keeps_every_field_orders_and_counts_drops(log, tmp_path):
    manifest = convert.convert([log], tmp_path / "ds", partitions=2)
    store = TraceStore(tmp_path / "ds")
    assert manifest["schema_version"] == 1 and len(store) == 5
    assert manifest["dropped"] == {"negative_runtime": 1, "no_procs": 0, "too_large": 1,
                                   "bad_line": 0}  # fmt: skip
    assert set(manifest["columns"]) == {*SWF_COLUMNS, "procs", "requested_time", "source"}
    assert manifest["sources"][0]["header"] == [" MaxProcs: 8"]
    assert [p["jobs"] for p in manifest["partitions"]] == [2, 3]
    assert [p["first_job"] for p in manifest["partitions"]] == [0, 2]
    assert all(len(p["sha256"]) == 64 for p in manifest["partitions"])
    everything = [store.read(k, columns=tuple(manifest["columns"])) for k in range(2)]
    columns = {k: np.concatenate([part[k] for part in everything]) for k in everything[0]}
    assert columns["id"].tolist() == [1, 2, 5, 6, 7]
    assert columns["requested_time"].tolist() == [20, 3, 7, 1, 10]  # request, else runtime
    assert columns["swf_requested_time"].tolist() == [20, -1, 7, 1, 10]
    assert columns["average_cpu_time"].tolist() == [1.5] * 5
    assert columns["executable"].tolist() == [7] * 5
    assert manifest["partitions"][1]["submit_range"] == [12.0, 21.0]


def test_round_trip_gives_the_simulator_the_same_jobs(log, tmp_path):
    convert.convert([log], tmp_path / "ds", partitions=3)
    direct, stored = read_swf(log), TraceStore(tmp_path / "ds").trace()
    for name in CORE_COLUMNS:
        assert np.array_equal(getattr(direct, name), getattr(stored, name)), name
    assert stored.machine_procs == 8
    for backfill in ("none", "easy", "conservative"):
        a, b = simulate(direct, "sjf", backfill), simulate(stored, "sjf", backfill)
        assert a.start_time.tolist() == b.start_time.tolist()
        assert a.metrics["avg_bsld"] == b.metrics["avg_bsld"]


def test_several_logs_make_one_history(log, tmp_path):
    manifest = convert.convert([log, log], tmp_path / "ds")
    submit = TraceStore(tmp_path / "ds").trace().submit
    assert len(submit) == 10 and np.all(np.diff(submit) >= 0)
    assert manifest["sources"][1]["time_shift"] == 22.0  # first submit 0 -> 21 + 1
    assert submit[5] == 22.0


def test_streaming_and_partitions_for_ranks(log, tmp_path):
    convert.convert([log], tmp_path / "ds", partitions=4)
    store = TraceStore(tmp_path / "ds")
    assert [store.partitions_for(r, 2) for r in range(2)] == [[0, 1], [2, 3]]
    assert [store.partitions_for(r, 3) for r in range(3)] == [[0], [1], [2, 3]]
    assert store.partitions_for(5, 6) == [1]  # more ranks than partitions: shared
    chunks = list(store.stream(store.partitions_for(0, 2), chunk_rows=1))
    assert all(len(c["id"]) == 1 for c in chunks)
    ids = np.concatenate([c["id"] for c in chunks]).tolist()
    assert ids == [1, 2]  # partitions [1], [2], [5], [6, 7]


def test_episode_sampler_is_seeded_and_reads_consecutive_jobs(tmp_path):
    columns = {name: np.arange(100).astype(dtype) for name, dtype in CORE_COLUMNS.items()}
    columns["procs"] = np.ones(100, dtype=np.int32)
    with StoreWriter(tmp_path / "ds", 100, 4, CORE_COLUMNS) as w:
        w.append(columns)
        w.finish(machine={"procs": 4}, dropped={})
    store = TraceStore(tmp_path / "ds")
    draws = [EpisodeSampler(store, [1, 3], 10, seed=7).sample().id for _ in range(2)]
    assert np.array_equal(draws[0], draws[1])
    sampler = EpisodeSampler(store, [1, 3], 10, seed=8)
    for _ in range(50):
        ids = sampler.sample().id
        assert np.array_equal(ids, np.arange(ids[0], ids[0] + 10))
        assert 25 <= ids[0] <= 40 or 75 <= ids[0] <= 90  # inside partition 1 or 3
    with pytest.raises(TraceError, match="no partition of this rank holds 30 jobs"):
        EpisodeSampler(store, [0], 30, seed=0)


def test_bad_lines_stop_or_are_skipped(log, tmp_path):
    log.write_text(log.read_text() + "8 30 -1 x 1\n")
    with pytest.raises(TraceError, match=r"log.swf:9: field 4 \(run time\) is not a number: 'x'"):
        convert.convert([log], tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    manifest = convert.convert([log], tmp_path / "ds", skip_bad=True)
    assert manifest["dropped"]["bad_line"] == 1 and manifest["jobs"] == 5


def test_existing_output_needs_force(log, tmp_path):
    convert.convert([log], tmp_path / "ds")
    with pytest.raises(TraceError, match="exists; add --force"):
        convert.convert([log], tmp_path / "ds")
    convert.convert([log, log], tmp_path / "ds", force=True)
    assert len(TraceStore(tmp_path / "ds")) == 10


def test_schema_missing_truncated_and_altered_partitions(log, tmp_path):
    ds = tmp_path / "ds"
    convert.convert([log], ds, partitions=2)
    manifest = json.loads((ds / "manifest.json").read_text())
    (ds / "manifest.json").write_text(json.dumps(dict(manifest, schema_version=99)))
    with pytest.raises(TraceError, match=r"manifest.json: schema version 99"):
        TraceStore(ds)
    (ds / "manifest.json").write_text(json.dumps(manifest))
    part = ds / "part-00001.h5"
    part.write_bytes(part.read_bytes()[:500])  # truncated
    assert TraceStore(ds).validate() == [f"{part}: checksum mismatch (altered or truncated)"]
    with pytest.raises(TraceError, match=r"part-00001.h5: checksum mismatch"):
        TraceStore(ds).trace()
    part.unlink()
    with pytest.raises(TraceError, match=r"part-00001.h5: missing partition"):
        TraceStore(ds).trace()
    with pytest.raises(TraceError, match=r"manifest.json: no such file"):
        TraceStore(tmp_path)


def test_validate_finds_disorder_and_the_cli_exits_1(log, tmp_path, capsys):
    ds = tmp_path / "ds"
    convert.convert([log], ds)
    assert data_main(["validate", str(ds)]) == 0
    with h5py.File(ds / "part-00000.h5", "r+") as f:
        f["submit"][0] = 1000.0
    manifest = json.loads((ds / "manifest.json").read_text())
    manifest["partitions"][0]["sha256"] = convert.sha256_of(ds / "part-00000.h5")
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert data_main(["validate", str(ds)]) == 1
    assert "submit times go backwards" in capsys.readouterr().err


def test_killed_generate_leaves_no_dataset(tmp_path):
    ds = tmp_path / "big"
    cmd = [sys.executable, "-m", "ddppo_hpc.data", "generate", "--jobs", "20000000",
           "--partitions", "4", str(ds)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".big.tmp-*/part-*.h5")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not ds.exists()
    assert list(tmp_path.glob(".big.tmp-*"))  # what kill -9 leaves: a hidden temporary
    assert data_main(["generate", "--jobs", "100", str(ds)]) == 0
    assert not list(tmp_path.glob(".big.tmp-*"))  # the next writer cleans it up
    assert len(TraceStore(ds)) == 100


def test_inspect_and_the_simulator_on_a_dataset(log, tmp_path, capsys):
    ds = tmp_path / "ds"
    convert.convert([log], ds)
    assert data_main(["inspect", "--json", str(ds)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == 5 and summary["users"] == 3 and summary["machine_procs"] == 8
    assert summary["procs"] == {"1-1": 1, "2-3": 2, "4-7": 1, "8-15": 1}
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.sim", "--trace", str(ds), "--start", "1", "--jobs",
         "3", "--json"], capture_output=True, text=True, timeout=120)  # fmt: skip
    from_file = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.sim", "--trace", str(log), "--start", "1", "--jobs",
         "3", "--json"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["avg_bsld"] == json.loads(from_file.stdout)["avg_bsld"]
