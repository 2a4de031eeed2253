"""The GPU-cluster trace readers (Philly 2017, Alibaba GPU 2023) of ddppo_hpc.data.gpu."""

import gzip
import json

import numpy as np
import pytest
from reference_sim import Job
from reference_sim import simulate as simulate_reference
from simhelpers import traces_dir

from ddppo_hpc.data.gpu import (
    ALIBABA_DTYPES,
    ALIBABA_NODES_HEADER,
    ALIBABA_PODS_HEADER,
    PHILLY_DTYPES,
    PHILLY_HEADER,
    read_alibaba,
    read_philly,
)
from ddppo_hpc.data.trace import Trace, TraceError
from ddppo_hpc.sim import simulate

PHILLY_ROWS = [
    "2017-10-09 07:01:55,66.0,1,66.0,aa",  # id 1, line 2
    "2017-10-09 07:00:00,100.0,4,400.0,bb",  # id 2: the earliest kept submit
    "2017-10-09 07:01:55,10.0,2,20.0,aa",  # id 3: same submit as id 1
    "2017-10-09 06:00:00,-5.0,1,0.0,cc",  # id 4: negative duration
    "2017-10-09 06:00:00,,1,0.0,cc",  # id 5: missing duration
    "2017-10-09 08:00:00,5.0,0,0.0,bb",  # id 6: no GPU
    "2017-10-09 08:00:00,5.0,-1,0.0,dd",  # id 7: negative GPUs
    "2017-10-10 07:00:00,0.0,8,0.0,",  # id 8: empty cluster, the largest job
]

NODES_ROWS = ["n0,64000,262144,2,P100", "n1,96000,393216,8,V100", "n2,16000,65536,0,"]
POD_ROWS = [
    "p1,12000,16384,1,1000,,LS,Running,100,900,150",  # id 1
    "p2,6000,12288,1,460,V100,BE,Succeeded,50,300,60",  # id 2: the earliest kept submit
    "p3,1000,1024,0,0,,LS,Running,10,500,10",  # id 3: CPU-only
    "p4,1000,1024,1,1000,,LS,Pending,5,600,",  # id 4: never scheduled
    "p5,1000,1024,1,1000,,BE,Failed,70,0,80",  # id 5: deletion 0 (end unknown)
    "p6,1000,1024,1,1000,,BE,Failed,70,,80",  # id 6: deletion missing
    "p7,1000,1024,1,1000,,BE,Failed,70,75,80",  # id 7: deleted before scheduled
    "p8,1000,1024,11,1000,,LS,Running,90,200,95",  # id 8: more than all 10 GPUs
    "p9,96000,393216,10,1000,P100,Guaranteed,Running,100,160,120",  # id 9: > one node
]


def csv_text(header, rows):
    return "\n".join([",".join(header), *rows]) + "\n"


def write(tmp_path, name, text, gz=False):
    path = tmp_path / name
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def philly(tmp_path, rows=PHILLY_ROWS, gz=False, **options):
    return read_philly(write(tmp_path, "philly.csv", csv_text(PHILLY_HEADER, rows), gz), **options)


def alibaba(tmp_path, rows=POD_ROWS, gz=False, **options):
    pods = write(tmp_path, "pods.csv", csv_text(ALIBABA_PODS_HEADER, rows), gz)
    nodes = write(tmp_path, "nodes.csv", csv_text(ALIBABA_NODES_HEADER, NODES_ROWS), gz)
    return read_alibaba(pods, nodes, **options)


def to_trace(gpu, source):
    core = ("id", "submit", "runtime", "requested_time", "procs", "user", "group", "queue")
    columns = {name: gpu.columns[name] for name in core}
    return Trace(**columns, machine_procs=gpu.machine["gpus"], dropped=gpu.dropped, source=source)


def test_philly_columns_drops_and_order(tmp_path):
    t = philly(tmp_path)
    c = t.columns
    assert {name: c[name].dtype for name in c} == {n: np.dtype(d) for n, d in PHILLY_DTYPES.items()}
    assert c["id"].tolist() == [2, 1, 3, 8]  # by (submit, id)
    assert c["submit"].tolist() == [0, 115, 115, 86400]
    assert c["runtime"].tolist() == [100, 66, 10, 0]
    assert c["requested_time"].tolist() == c["runtime"].tolist()
    assert c["procs"].tolist() == [4, 1, 2, 8]
    assert c["gpu_time"].tolist() == [400, 66, 20, 0]
    assert t.meta["virtual_clusters"] == ["aa", "bb", "cc", "dd"]  # first appearance
    assert c["virtual_cluster"].tolist() == [1, 0, 0, -1]
    assert c["user"].tolist() == c["queue"].tolist() == c["virtual_cluster"].tolist()
    assert c["group"].tolist() == [-1] * 4
    assert t.dropped == {"negative_runtime": 2, "no_procs": 2, "too_large": 0}
    assert t.machine == {"kind": "gpu_pool", "gpus": 8}
    assert t.meta["unix_start_time"] == 1507532400  # 2017-10-09 07:00:00 UTC
    assert t.meta["kind"] == "philly"
    assert len(t) == 4
    json.dumps([t.machine, t.meta])


def test_philly_machine_option(tmp_path):
    t = philly(tmp_path, machine_gpus=3)
    assert t.machine == {"kind": "gpu_pool", "gpus": 3}
    assert t.dropped["too_large"] == 2
    assert t.columns["id"].tolist() == [1, 3]
    assert t.columns["submit"].tolist() == [0, 0]  # relative to the earliest kept job
    assert t.meta["unix_start_time"] == 1507532515
    with pytest.raises(TraceError, match="positive number of GPUs, not 0"):
        philly(tmp_path, machine_gpus=0)


def test_alibaba_columns_drops_and_order(tmp_path):
    t = alibaba(tmp_path)
    c = t.columns
    assert {name: c[name].dtype for name in c} == {
        n: np.dtype(d) for n, d in ALIBABA_DTYPES.items()
    }
    assert c["id"].tolist() == [2, 1, 9]
    assert t.meta["origin_time"] == 50
    assert c["submit"].tolist() == [0, 50, 50]
    assert c["scheduled"].tolist() == [10, 100, 70]
    assert c["runtime"].tolist() == [240, 750, 40]  # deletion - scheduled
    assert c["requested_time"].tolist() == c["runtime"].tolist()
    assert c["procs"].tolist() == c["num_gpu"].tolist() == [1, 1, 10]
    assert c["gpu_milli"].tolist() == [460, 1000, 1000]
    assert c["cpu_milli"].tolist() == [6000, 12000, 96000]
    assert c["memory_mib"].tolist() == [12288, 16384, 393216]
    assert t.meta["gpu_specs"] == ["V100", "P100"]
    assert c["gpu_spec"].tolist() == [0, -1, 1]
    assert t.meta["qos_classes"] == ["LS", "BE", "Guaranteed"]
    assert c["qos"].tolist() == [1, 0, 2]
    assert t.meta["pod_phases"] == ["Running", "Succeeded", "Pending", "Failed"]
    assert c["pod_phase"].tolist() == [1, 0, 0]
    for name in ("user", "group", "queue"):
        assert c[name].tolist() == [-1, -1, -1]
    assert t.dropped == {"not_scheduled": 1, "negative_runtime": 3, "no_procs": 1, "too_large": 1}
    assert t.meta["kind"] == "alibaba"
    json.dumps([t.machine, t.meta])


def test_alibaba_machine_is_the_node_list(tmp_path):
    assert alibaba(tmp_path).machine == {
        "kind": "gpu_nodes",
        "gpus": 10,
        "nodes": [
            {"name": "n0", "cpu_milli": 64000, "memory_mib": 262144, "gpus": 2, "model": "P100"},
            {"name": "n1", "cpu_milli": 96000, "memory_mib": 393216, "gpus": 8, "model": "V100"},
            {"name": "n2", "cpu_milli": 16000, "memory_mib": 65536, "gpus": 0, "model": ""},
        ],
    }


@pytest.mark.parametrize("read", [philly, alibaba])
def test_gzip_reads_the_same(tmp_path, read):
    plain, packed = read(tmp_path), read(tmp_path, gz=True)  # same names: by magic bytes
    assert plain.columns.keys() == packed.columns.keys()
    for name, values in plain.columns.items():
        assert np.array_equal(values, packed.columns[name])
    assert (plain.dropped, plain.machine, plain.meta) == (
        packed.dropped,
        packed.machine,
        packed.meta,
    )


def test_blank_lines_are_ignored(tmp_path):
    t = philly(tmp_path, rows=["", PHILLY_ROWS[0], "", PHILLY_ROWS[1], ""])
    assert t.columns["id"].tolist() == [2, 1]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2017-10-09 07:00:00,1.0,1,1.0", "field 'cluster' is missing (expected 5 fields"),
        ("2017-10-09 07:00:00,1.0,1,1.0,aa,x", "field 'cluster' is followed by 1 extra"),
        ("2017-10-09 07:00:00,abc,1,1.0,aa", "field 'duration' is not a number: 'abc'"),
        ("2017-10-09 07:00:00,nan,1,1.0,aa", "field 'duration' is not a number: 'nan'"),
        ("2017-10-09 07:00:00,1.0,2.5,1.0,aa", "field 'num_gpus' is not an integer: '2.5'"),
        ("2017-10-09 07:00:00,1.0,,1.0,aa", "field 'num_gpus' is not a number: ''"),
        ("2017-10-09,1.0,1,1.0,aa", "field 'timestamp' is not a time 'YYYY-MM-DD HH:MM:SS'"),
        ("2017-02-30 07:00:00,1.0,1,1.0,aa", "field 'timestamp' is not a time"),
        ("2017-10-09 07:00:00,1.0,x,y,aa", "field 'num_gpus' is not a number: 'x'"),
    ],
)
def test_philly_bad_line_names_file_line_and_field(tmp_path, row, message):
    with pytest.raises(TraceError) as e:
        philly(tmp_path, rows=[PHILLY_ROWS[0], "", row, PHILLY_ROWS[1]])
    assert str(e.value).startswith(f"{tmp_path / 'philly.csv'}:4: {message}")


def test_the_first_bad_line_of_the_file_is_reported(tmp_path):
    rows = [PHILLY_ROWS[0], "2017-10-09 07:00:00,x,1,1.0,aa", "too,few"]
    with pytest.raises(TraceError, match=r"philly.csv:3: field 'duration'"):
        philly(tmp_path, rows=rows)
    with pytest.raises(TraceError, match=r"philly.csv:3: field 'num_gpus' is missing"):
        philly(tmp_path, rows=[PHILLY_ROWS[0], "too,few", "2017,x,1,1.0,aa"])


def test_alibaba_bad_line_names_file_line_and_field(tmp_path):
    bad = "p10,lots,1024,1,1000,,LS,Running,100,900,150"
    with pytest.raises(TraceError) as e:
        alibaba(tmp_path, rows=[POD_ROWS[0], bad])
    assert str(e.value) == f"{tmp_path / 'pods.csv'}:3: field 'cpu_milli' is not a number: 'lots'"


def test_skip_bad_counts_the_skipped_rows(tmp_path):
    rows = [PHILLY_ROWS[0], "x,1.0,1,1.0,aa", "only,three,fields", PHILLY_ROWS[1], "a,b,c,d,e,f"]
    t = philly(tmp_path, rows=rows, skip_bad=True)
    assert t.columns["id"].tolist() == [4, 1]  # ids stay the row numbers in the file
    assert t.dropped == {"negative_runtime": 0, "no_procs": 0, "too_large": 0, "bad_line": 3}
    t = alibaba(tmp_path, rows=[*POD_ROWS, "p10,1,1,1,1,,LS,Running,x,1,1"], skip_bad=True)
    assert t.dropped["bad_line"] == 1
    assert "bad_line" not in alibaba(tmp_path).dropped


def test_bad_node_line_raises_even_with_skip_bad(tmp_path):
    pods = write(tmp_path, "pods.csv", csv_text(ALIBABA_PODS_HEADER, POD_ROWS))
    nodes = write(tmp_path, "nodes.csv", csv_text(ALIBABA_NODES_HEADER, ["n0,1,1,-2,T4"]))
    with pytest.raises(TraceError, match=r"nodes.csv:2: field 'gpu' is negative: '-2'"):
        read_alibaba(pods, nodes, skip_bad=True)
    nodes = write(tmp_path, "nodes.csv", csv_text(ALIBABA_NODES_HEADER, ["n0,1,1,0,"]))
    with pytest.raises(TraceError, match=r"nodes.csv: the nodes have no GPU"):
        read_alibaba(pods, nodes)


@pytest.mark.parametrize("header", ["timestamp,duration,num_gpus,gpu_time", "a,b,c,d,e", ""])
def test_wrong_header_names_file_and_expected_columns(tmp_path, header):
    path = write(tmp_path, "philly.csv", header + "\n" + PHILLY_ROWS[0] + "\n")
    with pytest.raises(TraceError) as e:
        read_philly(path)
    assert str(e.value).startswith(
        f"{path}: expected the columns timestamp,duration,num_gpus,gpu_time,cluster, found"
    )


def test_missing_file_and_no_job_left(tmp_path):
    with pytest.raises(TraceError, match=r"absent.csv: no such file"):
        read_philly(tmp_path / "absent.csv")
    nodes = write(tmp_path, "nodes.csv", csv_text(ALIBABA_NODES_HEADER, NODES_ROWS))
    with pytest.raises(TraceError, match=r"gone.csv: no such file"):
        read_alibaba(tmp_path / "gone.csv", nodes)
    with pytest.raises(TraceError, match=r"philly.csv: no job is left after cleaning"):
        philly(tmp_path, rows=PHILLY_ROWS[3:7])
    with pytest.raises(TraceError, match=r"no job is left"):
        philly(tmp_path, rows=[])


def test_simulator_runs_on_the_core_columns(tmp_path):
    t = philly(tmp_path)
    result = simulate(to_trace(t, "philly.csv"), "fcfs", "easy")
    assert result.start_time.tolist() == [0, 115, 115, 86400]


# Real traces: (jobs kept, drops by reason, machine GPUs), as read on 2026-11-29.
REAL_PHILLY = (82_247, {"negative_runtime": 0, "no_procs": 0, "too_large": 0}, 128)
REAL_ALIBABA = (
    6_203,
    {"not_scheduled": 897, "negative_runtime": 0, "no_procs": 1_052, "too_large": 0},
    6_212,
)


def real(name):
    path = traces_dir() / name
    if not path.exists():
        pytest.skip(f"{path} is not here (set DDPPO_TRACES)")
    return path


def test_real_philly_counts():
    t = read_philly(real("philly-2017-jobs.csv.gz"))
    assert (len(t), t.dropped, t.machine["gpus"]) == REAL_PHILLY
    assert t.meta["unix_start_time"] == 1504521041  # 2017-09-04 10:30:41 UTC
    assert len(t.meta["virtual_clusters"]) == 15
    assert np.array_equal(t.columns["gpu_time"], t.columns["runtime"] * t.columns["procs"])


def test_real_alibaba_counts():
    t = read_alibaba(
        real("alibaba-gpu-v2023-pods.csv.gz"), real("alibaba-gpu-v2023-gpu-nodes.csv.gz")
    )
    assert (len(t), t.dropped, t.machine["gpus"]) == REAL_ALIBABA
    assert len(t.machine["nodes"]) == 1_213
    assert t.meta["gpu_specs"] == []
    assert (t.columns["scheduled"] >= t.columns["submit"]).all()
    assert (t.columns["procs"] <= max(n["gpus"] for n in t.machine["nodes"])).all()


def test_fcfs_easy_runs_on_real_philly():
    path = real("philly-2017-jobs.csv.gz")
    t = to_trace(read_philly(path), str(path))
    result = simulate(t, "fcfs", "easy")
    assert result.metrics["jobs"] == len(t) == 82_247
    assert (result.start_time >= t.submit).all()
    window = simulate(t, "fcfs", "easy", start=1000, jobs=300)
    jobs = [
        Job(int(t.id[i]), t.submit[i], t.runtime[i], int(t.procs[i]), t.requested_time[i])
        for i in range(1000, 1300)
    ]
    expected = simulate_reference(jobs, t.machine_procs, "fcfs", "easy")
    assert dict(zip(t.id[1000:1300].tolist(), window.start_time.tolist())) == expected
