"""`python -m ddppo_hpc.gpu`, GPU workloads through the trace store, and the synthetic
DL-job generator."""

import csv
import json

import numpy as np
import pytest
from simhelpers import SMALL_GPU, run_gpu

from ddppo_hpc.data import convert
from ddppo_hpc.data.dljobs import generate_dl_jobs
from ddppo_hpc.gpu import Cluster, simulate_gpu
from ddppo_hpc.gpu.topology import uniform
from ddppo_hpc.gpu.workload import from_store, from_trace, load


def test_json_metrics_by_hand(philly):
    out = run_gpu("--trace", philly, *SMALL_GPU, "--json")
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    # first fit: B on {1, 2} ends 11.5, D on {1, 2, 3} from 21 to 32 (test_gpu_sim)
    assert m["avg_jct"] == pytest.approx((100 + 11.5 + 20 + 30) / 4)
    assert m["avg_comm_cost"] == pytest.approx(3.5)
    assert (m["order"], m["placement"], m["jobs"], m["makespan"]) == ("fifo", "first_fit", 4, 100)


def test_a_load_above_1_within_the_arrivals_is_warned_and_in_the_json(philly):
    out = run_gpu("--trace", philly, *SMALL_GPU, "--json")
    m = json.loads(out.stdout)
    # 170 GPU-seconds (100 + 2 x 10 + 20 + 3 x 10) arriving over 2 s on 4 GPUs; within the
    # 2 s: A 2, B 2 x 2, C 1, D 0: 7 GPU-seconds of 8, so no job has to wait
    assert m["offered_load"] == pytest.approx(170 / (4 * 2))
    assert m["arrival_load"] == pytest.approx(7 / 8)
    assert m["dropped"] == {"negative_runtime": 0, "no_procs": 0, "too_large": 0}
    assert out.stderr == ""
    one = run_gpu(
        "--trace", philly, "--racks", 1, "--machines-per-rack", 1, "--gpus-per-machine", 2
    )
    # D (3 GPUs) dropped; within the 1 s of A, B, C's arrivals: A 1, B 2 x 1, C 0 on 2 GPUs
    assert one.stderr.splitlines() == [
        "python -m ddppo_hpc.gpu: warning: the chosen jobs ask 1.50 times what 2 GPUs can "
        "serve while they arrive (offered load 70.00): some must wait and the queue grows "
        "while they arrive (choose a bigger cluster, fewer jobs or a larger --load-scale)"
    ]
    light = run_gpu("--load", "0.5", "--jobs", "500", "--json")
    assert light.returncode == 0 and light.stderr == ""
    assert json.loads(light.stdout)["offered_load"] < 1


def test_store_gives_the_same_as_the_csv(philly, tmp_path):
    convert.convert([philly], tmp_path / "store")
    by_store = run_gpu("--trace", tmp_path / "store", *SMALL_GPU, "--order", "all", "--json")
    by_csv = run_gpu("--trace", philly, *SMALL_GPU, "--order", "all", "--json")
    assert by_store.returncode == 0, by_store.stderr
    assert json.loads(by_store.stdout) == json.loads(by_csv.stdout)
    w = from_store(tmp_path / "store", start=1, jobs=2)
    assert w.gpus.tolist() == [2, 1] and w.cpu.tolist() == [0, 0]


def test_per_job_csv(philly, tmp_path):
    out_path = tmp_path / "jobs.csv"
    out = run_gpu("--trace", philly, *SMALL_GPU, "--placement", "best_fit", "--per-job", out_path)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(out_path.open()))
    assert [r["placement"] for r in rows] == ["0", "2 3", "1", "2 3 1"]
    assert [float(r["jct"]) for r in rows] == pytest.approx([100, 10, 20, 30])
    assert "fifo" in out.stdout and "best_fit" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "absent.csv"], "absent.csv: no such file"),
        (["--link-costs", "4,1,16"], "link costs must satisfy"),
        (["--nodes-topology"], "--nodes-topology needs a trace"),
        (["--start", "5000"], "--start 5000 is outside"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    # Numbers out of range are refused while parsing: tests/unit/test_hostile_eval.py.
    out = run_gpu(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("python -m ddppo_hpc.gpu: error: ")
    assert message in out.stderr and "Traceback" not in out.stderr


def test_philly_without_node_list_and_jobs_too_large(philly, tmp_path):
    out = run_gpu("--trace", philly, "--nodes-topology")
    assert out.returncode == 2 and "has no node list" in out.stderr
    out = run_gpu(
        "--trace", philly, "--racks", "1", "--machines-per-rack", "1", "--gpus-per-machine", "2"
    )
    assert out.returncode == 0, out.stderr
    assert "too_large 1" in out.stdout  # D asks 3 GPUs of 2


def test_dl_jobs_are_seeded_and_shaped():
    a, b = generate_dl_jobs(3000, 64, seed=3), generate_dl_jobs(3000, 64, seed=3)
    for name, values in a.columns.items():
        assert np.array_equal(values, b.columns[name]), name
    c = a.columns
    assert not np.array_equal(c["runtime"], generate_dl_jobs(3000, 64, seed=4).columns["runtime"])
    assert set(np.unique(c["procs"]).tolist()) <= {1, 2, 4, 8, 16, 32}
    assert 0.6 < (c["procs"] == 1).mean() < 0.8
    assert np.all(np.diff(c["submit"]) >= 0) and c["submit"][0] == 0
    assert np.array_equal(c["cpu_milli"], c["procs"] * 6000)
    # offered load: GPU-seconds asked per second of the arrival span, about 0.9 * 64 GPUs
    load = (c["runtime"] * c["procs"]).sum() / c["submit"][-1] / 64
    assert 0.7 < load < 1.1
    assert generate_dl_jobs(100, 4, seed=0).columns["procs"].max() <= 4


def test_synthetic_jobs_fit_an_alibaba_node():
    cluster = Cluster(uniform(1, 2, 8, ("G2",)))
    w = from_trace(generate_dl_jobs(400, 16, seed=1), "dl").fitted(cluster.machines)
    assert len(w) == 400  # 8 GPUs take 8 shares of CPU and memory of a node
    assert simulate_gpu(w, cluster, "srtf", "best_fit").metrics["jobs"] == 400


def test_load_refuses_mixed_inputs(philly, tmp_path):
    with pytest.raises(ValueError, match="cannot use"):
        load([str(philly), str(philly)])


def test_per_job_never_replaces_the_trace(philly):
    before = philly.read_bytes()
    done = run_gpu("--trace", philly, "--per-job", philly)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"python -m ddppo_hpc.gpu: error: {philly}: would replace {philly}, an input: "
        "write it elsewhere"
    )
    assert philly.read_bytes() == before


def test_wait_both_gives_each_pair_both_ways(philly):
    out = run_gpu("--trace", philly, *SMALL_GPU, "--order", "srtf", "--placement", "speed_fit",
              "--wait", "both", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["placement"], r["wait"]) for r in rows] == [
        ("speed_fit", False),
        ("speed_fit", True),
    ]
    w = load([philly])
    expected = simulate_gpu(
        w,
        Cluster(uniform(1, 2, 2, ("V100M32", "V100M16", "P100", "T4"))),
        "srtf",
        "speed_fit",
        wait=True,
    )
    assert {k: rows[1][k] for k in expected.metrics} == expected.metrics
    table = run_gpu("--trace", philly, *SMALL_GPU, "--wait", "yes").stdout.splitlines()
    assert table[1].split()[:4] == ["order", "placement", "wait", "jobs"]
    assert table[2].split()[:3] == ["fifo", "first_fit", "yes"]
    bad = run_gpu("--trace", philly, *SMALL_GPU, "--wait", "both", "--per-job", "x.csv")
    assert (
        bad.returncode == 2 and "--per-job needs a single order, placement and wait" in bad.stderr
    )
