"""A GPU trace's load: submit times scaled by a factor (`--load-scale`, `gpu.load_scale`) and
a smaller machine sampled from the trace's own node list (`--nodes-every`,
`gpu.nodes_every`); docs/gpu.md, "Load and machine size"."""

import json

import numpy as np
import pytest
from simhelpers import SMALL_GPU, TINY_GPU, alibaba_store, run_gpu

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.gpu import training
from ddppo_hpc.gpu.topology import from_nodes
from ddppo_hpc.gpu.workload import GpuWorkload

# Types (model, GPUs): T4 x 2 at n0, n2, n3; G3 x 8 at n1, n4; T4 x 4 at n6; n5 has no GPU.
NODE_ROWS = [
    ("n0", 64000, 262144, 2, "T4"),
    ("n1", 96000, 393216, 8, "G3"),
    ("n2", 64000, 262144, 2, "T4"),
    ("n3", 64000, 262144, 2, "T4"),
    ("n4", 96000, 393216, 8, "G3"),
    ("n5", 96000, 393216, 0, ""),
    ("n6", 64000, 262144, 4, "T4"),
]
NODES = [",".join(map(str, row)) for row in NODE_ROWS]
PODS = [f"p{i},6000,12288,{1 + i % 2},1000,,BE,Succeeded,{i},{600 + i},{i}" for i in range(40)]


@pytest.fixture
def alibaba(tmp_path):
    return alibaba_store(tmp_path, NODES, PODS)


def test_nodes_every_keeps_the_first_of_every_k_nodes_of_each_type():
    keys = ("name", "cpu_milli", "memory_mib", "gpus", "model")
    nodes = [dict(zip(keys, row)) for row in NODE_ROWS]
    every2 = from_nodes(nodes, 2, every=2)
    # T4 x 2: n0 and n3 (the 1st and 3rd); G3 x 8: n1; T4 x 4: n6; in file order
    assert every2.gpus.tolist() == [2, 8, 2, 4]
    assert every2.model == ("T4", "G3", "T4", "T4")
    assert every2.rack.tolist() == [0, 0, 1, 1]  # racks of 2 consecutive kept nodes
    assert from_nodes(nodes, 2, every=3).gpus.tolist() == [2, 8, 4]
    assert from_nodes(nodes, 2).gpus.tolist() == [2, 8, 2, 2, 8, 4]
    with pytest.raises(ValueError, match="nodes every must be at least 1, not 0"):
        from_nodes(nodes, 2, every=0)


def test_load_scale_multiplies_the_submit_times():
    w = GpuWorkload(
        id=np.arange(3),
        submit=np.array([10.0, 20.0, 50.0]),
        runtime=np.array([40.0, 40.0, 40.0]),
        gpus=np.array([1, 2, 1], dtype=np.int32),
        cpu=np.zeros(3),
        mem=np.zeros(3),
        user=np.full(3, -1),
    )
    fast = w.at_load(0.25)
    assert fast.submit.tolist() == [2.5, 5.0, 12.5]
    assert fast.runtime.tolist() == w.runtime.tolist()
    # 160 GPU-seconds over 40 s on 2 GPUs, then over 10 s
    assert (w.offered_load(0, 3, 2), fast.offered_load(0, 3, 2)) == (2.0, 8.0)
    # within the 40 s of arrivals: 40 x 1 + min(40, 30) x 2 + 0 = 100 GPU-seconds; x 4:
    # 160 s of arrivals, 40 + 40 x 2 + 0 = 120 GPU-seconds
    assert (w.arrival_load(0, 3, 2), w.at_load(4).arrival_load(0, 3, 2)) == (1.25, 0.375)
    assert (w.at_load(4).offered_load(0, 3, 2), w.arrival_load(0, 1, 2)) == (0.5, None)
    assert w.at_load(1.0) is w
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="load scale must be a positive number"):
            w.at_load(bad)


def test_load_scale_schedule_by_hand(philly):
    out = run_gpu("--trace", philly, *SMALL_GPU, "--load-scale", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    # submits 0, 0, 0.5, 1: A on {0} to 100, B on {1, 2} to 11.5, C on {3} 0.5 to 20.5, D on
    # {1, 2, 3} (cost 3, x 1.1) from 20.5 to 31.5: JCTs 100, 11.5, 20, 30.5
    assert m["avg_jct"] == pytest.approx((100 + 11.5 + 20 + 30.5) / 4)
    assert m["load_scale"] == 0.5
    assert m["offered_load"] == pytest.approx(170 / (4 * 1))  # over 1 s instead of 2
    # within the 1 s of arrivals: A 1 s, B 2 x 1 s, C 0.5 s, D 0, on 4 GPUs
    assert m["arrival_load"] == pytest.approx(3.5 / 4)
    assert json.loads(run_gpu("--trace", philly, *SMALL_GPU, "--json").stdout)["load_scale"] == 1.0
    table = run_gpu("--trace", philly, *SMALL_GPU, "--load-scale", "0.5")
    assert "load of the chosen jobs 42.50, 0.88 within their arrivals (submit times x 0.5)" in (
        table.stdout
    )


def test_nodes_every_in_the_command(alibaba):
    out = run_gpu(
        "--trace", alibaba, "--nodes-topology", "--nodes-every", "2", "--machines-per-rack", 2
    )
    assert out.returncode == 0, out.stderr
    assert "40 jobs on 16 GPUs in 4 machines" in out.stdout  # n0, n1, n3, n6
    whole = run_gpu("--trace", alibaba, "--nodes-topology")
    assert "40 jobs on 26 GPUs in 6 machines" in whole.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--load-scale", "0"], "argument --load-scale: 0 is outside"),
        (["--load-scale", "-1"], "argument --load-scale: -1 is outside"),
        (["--load-scale", "nan"], "argument --load-scale: nan is outside"),
        (["--nodes-every", "0"], "argument --nodes-every: 0 is outside 1.."),
        (["--nodes-every", "2"], "error: --nodes-every samples the trace's node list: it needs"),
    ],
)
def test_bad_scale_values_are_one_line(philly, args, message):
    out = run_gpu("--trace", philly, *SMALL_GPU, *args)
    lines = out.stderr.splitlines()
    assert out.returncode == 2 and message in lines[-1]
    assert all(line.startswith(("usage:", " ")) for line in lines[:-1])  # argparse's usage


def test_config_scales_the_trace_and_samples_its_nodes(alibaba):
    base = [f"data.trace={alibaba}", "gpu.mode=placement", "gpu.nodes_topology=true"]
    base += ["gpu.machines_per_rack=2", "gpu.holdout_jobs=4", "env.window_jobs=8"]
    config = load_config(None, [*base, "gpu.nodes_every=2", "gpu.load_scale=0.5"])
    cluster = training.cluster_of(config)
    assert cluster.machines.gpus.tolist() == [2, 8, 2, 4]
    jobs = training.workload_of(config, cluster, 0)
    whole = training.workload_of(load_config(None, base), cluster, 0)
    assert np.array_equal(jobs.submit, whole.submit * 0.5)
    synthetic = [*TINY_GPU, "gpu.mode=placement"]
    fast = load_config(None, [*synthetic, "gpu.load_scale=0.5"])
    jobs = training.workload_of(fast, training.cluster_of(fast), 0)
    slow = load_config(None, synthetic)
    assert np.array_equal(
        jobs.submit, training.workload_of(slow, training.cluster_of(slow), 0).submit * 0.5
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["gpu.load_scale=0"], "'gpu.load_scale' must be positive"),
        (["gpu.nodes_every=0"], "'gpu.nodes_every' must be positive"),
        (["gpu.nodes_every=2"], "'gpu.nodes_every' samples the trace's node list: it needs"),
    ],
)
def test_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["gpu.mode=placement", *overrides])
