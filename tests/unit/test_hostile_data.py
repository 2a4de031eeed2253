"""Hostile input to the data and sim command lines (issue 14): --force that would delete
what is not a dataset, full disks, damaged stores, out-of-range options, inputs that are
not text logs, misleading messages. Each gets one line on stderr and exit code 2 (1 from
`data validate`), and no output is lost or half-written."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from ddppo_hpc.data import convert
from ddppo_hpc.data.cli import main as data_main
from ddppo_hpc.data.store import CORE_COLUMNS, TraceStore
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.data.writer import StoreWriter
from ddppo_hpc.sim.cli import main as sim_main

DATA = "python -m ddppo_hpc.data: error: "
SIM = "python -m ddppo_hpc.sim: error: "


def swf_line(i, submit, runtime, procs):
    fields = [i, submit, -1, runtime, procs, -1, -1, procs, runtime + 5, -1, 1, i % 4, 1]
    return " ".join(map(str, [*fields, -1, -1, -1, -1, -1]))


def write_swf(path: Path, jobs: int = 60, runtime=lambda i: 10 + i % 7) -> Path:
    lines = [swf_line(i + 1, 3 * i, runtime(i), 1 + i % 8) for i in range(jobs)]
    path.write_text("; MaxProcs: 8\n" + "\n".join(lines) + "\n")
    return path


def one_error_line(err: str, prefix: str) -> str:
    """The single line of stderr, which must start with the command's error prefix."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


def run(module: str, *args, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", f"ddppo_hpc.{module}", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.fixture
def log(tmp_path):
    return write_swf(tmp_path / "log.swf")


@pytest.fixture
def store(log, tmp_path):
    convert.convert([log], tmp_path / "ds", partitions=2)
    return tmp_path / "ds"


# --- case 2: --force replaces a dataset and nothing else ---------------------------------


def test_force_never_replaces_the_current_directory(log, monkeypatch, capsys):
    monkeypatch.chdir(log.parent)
    (log.parent / "notes.txt").write_text("mine")
    assert data_main(["convert", "log.swf", ".", "--force"]) == 2
    line = one_error_line(capsys.readouterr().err, DATA)
    assert "not a dataset" in line
    assert log.exists() and (log.parent / "notes.txt").read_text() == "mine"


def test_force_never_replaces_the_current_dataset_directory(log, store, monkeypatch, capsys):
    monkeypatch.chdir(store)
    before = sorted(p.name for p in store.iterdir())
    assert data_main(["convert", str(log), ".", "--force"]) == 2
    assert "current directory" in one_error_line(capsys.readouterr().err, DATA)
    assert sorted(p.name for p in store.iterdir()) == before


def test_force_never_replaces_a_directory_that_is_not_a_dataset(log, tmp_path, capsys):
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    assert data_main(["convert", str(log), str(other), "--force"]) == 2
    assert data_main(["generate", "--jobs", "10", str(other), "--force"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{DATA}{other}: exists and is not a dataset (no manifest.json); "
                   "choose another OUT_DIR"] * 2  # fmt: skip
    assert (other / "cat.jpg").read_bytes() == b"\xff\xd8"


def test_force_never_replaces_a_dataset_that_holds_an_input(store, tmp_path, capsys):
    inside = write_swf(store / "more.swf")
    manifest = (store / "manifest.json").read_text()
    assert data_main(["convert", str(inside), str(store), "--force"]) == 2
    line = one_error_line(capsys.readouterr().err, DATA)
    assert str(inside) in line and "input" in line
    assert inside.exists() and (store / "manifest.json").read_text() == manifest


# --- case 4: a full disk --------------------------------------------------------------


def assert_no_space(done, prefix: str, target: Path):
    """Exit 2 (not a segfault), one line naming the target, no temporary left beside it."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    line = one_error_line(done.stderr, prefix)
    assert line == f"{prefix}{target}: cannot write: no space left on device"
    assert not [p for p in target.parent.iterdir() if ".tmp" in p.name]


def test_generate_on_a_full_disk_is_one_line_and_leaves_nothing(small_disk):
    disk = small_disk(128)
    done = run("data", "generate", "--jobs", 200_000, disk / "ds")
    assert_no_space(done, DATA, disk / "ds")
    assert not (disk / "ds").exists()


def test_convert_on_a_full_disk_keeps_the_previous_dataset(small_disk, tmp_path):
    disk = small_disk(256)
    small = write_swf(tmp_path / "small.swf", jobs=20)
    assert run("data", "convert", small, disk / "ds").returncode == 0
    manifest = (disk / "ds" / "manifest.json").read_text()
    big = write_swf(tmp_path / "big.swf", jobs=60_000)
    done = run("data", "convert", big, disk / "ds", "--force", "--partitions", 3)
    assert_no_space(done, DATA, disk / "ds")
    assert (disk / "ds" / "manifest.json").read_text() == manifest
    assert data_main(["validate", str(disk / "ds")]) == 0


def test_sim_per_job_on_a_full_disk(small_disk, tmp_path):
    disk = small_disk(16)
    done = run("sim", "--synthetic-jobs", 3000, "--per-job", disk / "jobs.csv")
    assert_no_space(done, SIM, disk / "jobs.csv")
    assert not (disk / "jobs.csv").exists()


# --- case 5: damaged stores are refused, never read --------------------------------------


def flip_a_runtime_byte(store: Path, k: int = 0) -> None:
    """Flips a byte inside the runtime chunk where LZF still decompresses (to other
    values): the damage only a checksum shows."""
    path = store / f"part-{k:05d}.h5"
    with h5py.File(path, "r") as f:
        info = f["runtime"].id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    data[info.byte_offset + info.size - 1] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_a_checksum_error_for_every_reader(store, capsys):
    flip_a_runtime_byte(store)
    assert sim_main(["--trace", str(store), "--json"]) == 2
    line = one_error_line(capsys.readouterr().err, SIM)
    assert line == f"{SIM}{store / 'part-00000.h5'}: checksum mismatch (altered or truncated)"
    with pytest.raises(TraceError, match="checksum mismatch"):
        TraceStore(store).trace(0, 1)
    last = len(TraceStore(store)) - 1
    assert TraceStore(store).trace(last, 1).id.size  # the intact partition still reads


def edit_manifest(store: Path, change) -> Path:
    """Rewrites the manifest: `change` edits it in place, or returns a replacement."""
    path = store / "manifest.json"
    document = json.loads(path.read_text())
    document = change(document) or document
    path.write_text(json.dumps(document))
    return path


def drop(key, within=None):
    """A manifest change that deletes a key (of `within`, a path of keys and indices)."""

    def change(m):
        parent = m
        for step in within or ():
            parent = parent[step]
        del parent[key]

    return change


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda m: m["partitions"][0].update(jobs=-5), "partitions[0].jobs is -5"),
        (lambda m: [m], "a JSON list, not an object"),
        (drop("machine"), "machine is missing"),
        (lambda m: m["machine"].update(procs="8"), "machine.procs is '8'"),
        (lambda m: m["machine"].update(procs=0), "machine.procs is 0"),
        (lambda m: m.update(partitions={}), "partitions is {}"),
        (drop("sha256", ("partitions", 1)), "partitions[1].sha256 is missing"),
        (lambda m: m["partitions"][1].update(file="../log.swf"), "partitions[1].file is"),
        (lambda m: m["partitions"][1].update(first_job=0), "partitions[1].first_job is 0"),
        (lambda m: m.update(jobs=61), "partitions hold 60 jobs, jobs says 61"),
        (drop("procs", ("columns",)), "columns.procs is missing"),
    ],
)
def test_a_bad_manifest_is_one_line_naming_the_key(store, capsys, change, problem):
    manifest = edit_manifest(store, change)
    assert sim_main(["--trace", str(store)]) == 2
    line = one_error_line(capsys.readouterr().err, SIM)
    assert line.startswith(f"{SIM}{manifest}: ") and problem in line, line
    assert data_main(["validate", str(store)]) == 1
    err = capsys.readouterr().err
    assert f"{manifest}: " in err and problem in err and "Traceback" not in err


def test_partition_lengths_must_match_the_manifest(store, capsys):
    def move_a_job(m):
        m["partitions"][0]["jobs"] -= 1
        m["partitions"][1]["jobs"] += 1
        m["partitions"][1]["first_job"] -= 1

    edit_manifest(store, move_a_job)
    assert sim_main(["--trace", str(store)]) == 2
    line = one_error_line(capsys.readouterr().err, SIM)
    assert line == f"{SIM}{store / 'part-00000.h5'}: id has 30 rows, the manifest says 29"
    assert data_main(["validate", str(store)]) == 1
    assert "part-00001.h5: id has 30 rows, the manifest says 31" in capsys.readouterr().err


# --- case 6: out-of-range options are refused while parsing ---------------------------


@pytest.mark.parametrize(
    ("module", "args", "option"),
    [
        ("data", ["generate", "OUT", "--jobs", "10", "--procs", "99999999999"], "--procs"),
        ("data", ["generate", "OUT", "--jobs", "0"], "--jobs"),
        ("data", ["generate", "OUT", "--jobs", "10", "--users", "0"], "--users"),
        ("data", ["generate", "OUT", "--jobs", "10", "--partitions", "0"], "--partitions"),
        ("data", ["generate", "OUT", "--jobs", "10", "--seed", "-1"], "--seed"),
        ("data", ["convert", "log.swf", "OUT", "--procs", "2147483648"], "--procs"),
        ("sim", ["--procs", "2147483648"], "--procs"),
        ("sim", ["--jobs", "0"], "--jobs"),
        ("sim", ["--start", "-1"], "--start"),
        ("sim", ["--synthetic-jobs", "0"], "--synthetic-jobs"),
        ("sim", ["--seed", "-3"], "--seed"),
    ],
)
def test_out_of_range_options_are_refused(log, module, args, option):
    out = log.parent / "out"
    done = run(module, *[out if a == "OUT" else a for a in args], cwd=log.parent)
    assert done.returncode == 2
    assert f"error: argument {option}" in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and not out.exists()


def test_the_synthetic_swf_writer_checks_ranges_and_a_full_disk(small_disk, tmp_path):
    out = tmp_path / "s.swf"
    done = run("data.synthetic", "--jobs", 10, "--procs", 2**31, "--out", out)
    assert done.returncode == 2 and not out.exists()
    assert "argument --procs: 2147483648 is outside 1..2147483647" in done.stderr
    disk = small_disk(16)
    done = run("data.synthetic", "--jobs", 5000, "--out", disk / "s.swf")
    assert done.returncode == 2 and os.listdir(disk) == []
    assert one_error_line(done.stderr, "python -m ddppo_hpc.data.synthetic: error: ") == (
        f"python -m ddppo_hpc.data.synthetic: error: {disk / 's.swf'}: cannot write: "
        "no space left on device"
    )


def test_validate_checks_stored_procs_against_the_machine(tmp_path, capsys):
    columns = {name: (1 + np.arange(10)).astype(dtype) for name, dtype in CORE_COLUMNS.items()}
    with StoreWriter(tmp_path / "ds", 10, 2, CORE_COLUMNS) as w:
        w.append(columns)
        w.finish(machine={"procs": 8}, dropped={})
    assert data_main(["validate", str(tmp_path / "ds")]) == 1
    part = tmp_path / "ds" / "part-00001.h5"
    assert capsys.readouterr().err.splitlines() == [
        f"python -m ddppo_hpc.data validate: {part}: procs outside 1..8 (9 at job 8)"
    ]


# --- case 7: inputs that are not text logs --------------------------------------------


@pytest.fixture(params=["device", "fifo", "nul", "no_newline", "directory"])
def not_a_log(request, tmp_path):
    kind = request.param
    if kind == "device":
        return Path("/dev/zero"), "not a regular file"
    path = tmp_path / f"{kind}.swf"
    if kind == "fifo":
        os.mkfifo(path)
        return path, "not a regular file"
    if kind == "directory":
        path.mkdir()
        return path, "not a regular file"
    if kind == "nul":
        path.write_bytes(b"; MaxProcs: 8\n" + b"\0" * 100_000)
        return path, "binary data (a NUL byte at offset 14)"
    path.write_bytes(b"1" * 200_000)
    return path, "no line break within 64 KiB (from byte 0)"


def test_sim_and_convert_refuse_what_is_not_a_text_log(not_a_log, tmp_path):
    path, problem = not_a_log
    for done, prefix in (
        (run("data", "convert", path, tmp_path / "out", timeout=30), DATA),
        *([] if path.is_dir() else [(run("sim", "--trace", path, timeout=30), SIM)]),
    ):
        assert done.returncode == 2
        assert one_error_line(done.stderr, prefix) == f"{prefix}{path}: {problem}; give a text log"
    assert not (tmp_path / "out").exists()


def test_gpu_csv_readers_refuse_binary_data(tmp_path, capsys):
    philly = tmp_path / "philly.csv"
    philly.write_bytes(b"timestamp,duration,num_gpus,gpu_time,cluster\n\0\0\0")
    assert data_main(["convert", str(philly), str(tmp_path / "out")]) == 2
    assert one_error_line(capsys.readouterr().err, DATA) == (
        f"{DATA}{philly}: binary data (a NUL byte at offset 45); give a text log"
    )


# --- case 9: messages that say what is wrong ------------------------------------------


def test_a_trace_whose_every_job_is_dropped_says_why(tmp_path, capsys):
    path = write_swf(tmp_path / "t.swf", jobs=5, runtime=lambda i: -1)
    assert sim_main(["--trace", str(path)]) == 2
    assert one_error_line(capsys.readouterr().err, SIM) == (
        f"{SIM}{path}: every one of the 5 jobs was dropped: 5 with a negative runtime"
    )
    lines = [swf_line(1, 0, -1, 4), swf_line(2, 1, 5, 0), swf_line(3, 2, 5, 9)]
    path.write_text("\n".join(lines) + "\n")
    assert sim_main(["--trace", str(path), "--procs", "8"]) == 2
    assert one_error_line(capsys.readouterr().err, SIM) == (
        f"{SIM}{path}: every one of the 3 jobs was dropped: 1 with a negative runtime, "
        "1 with no procs, 1 larger than the machine (8 procs; the smallest needs 9)"
    )


def test_a_window_of_no_jobs_is_refused_by_the_store(store):
    with pytest.raises(TraceError, match="a window needs at least one job, not 0"):
        TraceStore(store).trace(0, 0)


def test_gzip_inputs_name_their_path_once(tmp_path, log):
    missing = tmp_path / "absent.swf.gz"
    truncated = tmp_path / "cut.swf.gz"
    truncated.write_bytes(gzip.compress(log.read_bytes())[:60])
    for path in (missing, truncated):
        for done, prefix in ((run("sim", "--trace", path), SIM),
                             (run("data", "convert", path, tmp_path / "o"), DATA)):  # fmt: skip
            line = one_error_line(done.stderr, prefix)
            assert done.returncode == 2 and line.count(str(path)) == 1, line
    shutil.rmtree(tmp_path / "o", ignore_errors=True)


def test_sim_per_job_never_replaces_its_trace_and_checks_its_folder_first(log, capsys):
    before = log.read_bytes()
    assert sim_main(["--trace", str(log), "--per-job", str(log)]) == 2
    assert one_error_line(capsys.readouterr().err, SIM).endswith(
        f"{log}: would replace {log}, an input: write it elsewhere"
    )
    assert log.read_bytes() == before
    missing = log.parent / "no-such-folder" / "jobs.csv"
    assert sim_main(["--trace", str(log), "--per-job", str(missing)]) == 2
    assert "cannot write: no such file or directory" in capsys.readouterr().err
