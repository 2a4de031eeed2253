"""Training and evaluation in GPU mode (docs/gpu.md, "Environments"): configuration
checks, a tiny dual-agent run and its comparison with the heuristics."""

import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from simhelpers import TINY_GPU, alibaba_store

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.dist import context
from ddppo_hpc.gpu import ORDERS, simulate_gpu, training
from ddppo_hpc.gpu.env import GLOBAL_FEATURES, SLOT_FEATURES
from ddppo_hpc.policy import DualPolicy
from ddppo_hpc.rl.ppo import masked_distribution, teacher_cross_entropy
from ddppo_hpc.train import Trainer, train


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["gpu.mode=dual"], "'gpu.mode: dual' needs 'policy.name' dual"),
        (["policy.name=dual"], "'gpu.mode: off' needs 'policy.name' mlp, attention, gtrxl"),
        (["gpu.mode=placement", "policy.name=attention"], "needs 'policy.name' mlp"),
        (["gpu.mode=sharing"], "'gpu.mode' must be one of off, placement, dual"),
        (["gpu.order=sjf"], "'gpu.order' must be one of fifo, srtf, las"),
        (["gpu.racks=0"], "'gpu.racks' must be positive"),
        (["gpu.reward_baseline=fifo"], "'gpu.reward_baseline' must be one of none, first_fit"),
        (["ppo.imitation_updates=-1"], "'ppo.imitation_updates' must be at least 0"),
        (["gpu.teacher=best"], "'gpu.teacher' must be one of config, training_best, training_"),
        (["gpu.teacher=training_best"], "'gpu.teacher: training_best' is for GPU mode"),
        (["gpu.set_aside=true", "gpu.wait=true"], "'gpu.set_aside' needs 'gpu.wait' and 'gpu"),
        (["gpu.teacher_holds=false"], "'gpu.teacher_holds: false' says the teacher does not"),
    ],
)
def test_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_cluster_and_holdout_errors():
    config = load_config(None, ["gpu.link_costs=1,4", "gpu.mode=placement"])
    with pytest.raises(ConfigError, match="'gpu.link_costs' must be three numbers"):
        training.cluster_of(config)
    config = load_config(None, [*TINY_GPU, "gpu.mode=placement", "gpu.holdout_jobs=790"])
    cluster = training.cluster_of(config)
    with pytest.raises(ConfigError, match="leave no training window in 800 jobs"):
        training.split(config, training.workload_of(config, cluster, 0))


NODES = ["n0,64000,262144,2,P100", "n1,96000,393216,8,G3"]
PODS = [f"p{i},6000,12288,{1 + i % 2},1000,,BE,Succeeded,{i},{600 + i},{i}" for i in range(40)]


def test_nodes_topology_is_the_traces_own_node_list(tmp_path):
    overrides = [f"data.trace={alibaba_store(tmp_path, NODES, PODS)}", "gpu.mode=placement"]
    config = load_config(None, [*overrides, "gpu.nodes_topology=true", "gpu.machines_per_rack=1"])
    machines = training.cluster_of(config).machines
    assert machines.gpus.tolist() == [2, 8] and machines.model == ("P100", "G3")
    assert machines.rack.tolist() == [0, 1] and machines.cpu.tolist() == [64000, 96000]
    assert training.cluster_of(load_config(None, overrides)).total_gpus == 64  # uniform
    config = load_config(None, ["gpu.mode=placement", "gpu.nodes_topology=true"])
    with pytest.raises(ConfigError, match="'gpu.nodes_topology' needs a trace with a node list"):
        training.cluster_of(config)


def test_validation_jobs_come_before_the_held_out_ones():
    config = load_config(None, [*TINY_GPU, "gpu.holdout_jobs=100", "gpu.validation_jobs=50"])
    jobs = training.workload_of(config, training.cluster_of(config), 0)
    train, valid, held = training.split(config, jobs)
    assert (len(train), len(valid), len(held)) == (len(jobs) - 150, 50, 100)
    assert valid.id[0] == jobs.id[len(jobs) - 150] and held.id[0] == jobs.id[len(jobs) - 100]


@pytest.mark.parametrize(
    ("wait", "imitation_wait"), [("false", "false"), ("true", "false"), ("true", "true")]
)
def test_imitation_updates_follow_and_copy_the_heuristic(tmp_path, wait, imitation_wait):
    overrides = [*TINY_GPU, "gpu.mode=placement", "ppo.imitation_updates=1", f"gpu.wait={wait}"]
    config = load_config(None, [*overrides, f"ppo.imitation_wait={imitation_wait}"])
    trainer = Trainer(config, context.init("cpu"), tmp_path)
    env = training.make_env(config, 0, 1)
    env.reset()
    expected = []
    for _ in range(config.ppo.rollout_steps):
        expected.append(env.heuristic_actions("srtf", "best_fit"))
        env.step(expected[-1])
    rollout = trainer.rollout()
    assert np.array_equal(trainer.storage.actions.numpy(), np.stack(expected))
    stats = trainer.learn(rollout["last_value"])
    assert stats["policy_loss"] > 0 and stats["approx_kl"] == 0  # a cross-entropy
    # with gpu.wait the wait slot (the last; else a GPU) is left out of the cloning: the
    # heuristics never wait, and PPO is to learn when to; with ppo.imitation_wait the copy
    # learns the never-waiting too
    cloned = wait == "false" or imitation_wait == "true"
    assert trainer.storage.mask[..., -1].any() == cloned
    trainer.update = 1
    assert not trainer.imitating()
    trainer.rollout()
    assert trainer.storage.mask[..., -1].any()


def test_the_imitation_coef_pulls_ppo_towards_the_teacher(tmp_path):
    overrides = [*TINY_GPU, "gpu.mode=placement", "gpu.wait=true"]
    trainers, last = {}, {}
    for coef in (0, 10):
        config = load_config(None, [*overrides, f"ppo.imitation_coef={coef}"])
        trainers[coef] = Trainer(config, context.init("cpu"), tmp_path / str(coef))
        last[coef] = trainers[coef].rollout()["last_value"]
    storage = trainers[10].storage
    assert trainers[0].storage.teacher is None
    assert torch.equal(storage.actions, trainers[0].storage.actions)  # the same rollout
    env = training.make_env(config, 0, 1)  # replayed: the teacher's pick at each state
    env.reset()
    expected = []
    for actions in storage.actions.numpy().astype(np.int32):
        expected.append(env.heuristic_actions())
        env.step(actions)
    assert np.array_equal(storage.teacher.numpy(), np.stack(expected))
    # one update each on that rollout: the term lowers the teacher's cross-entropy there
    flat = {k: storage.flat(k) for k in ("jobs", "cluster", "mask", "teacher")}
    slots = trainers[10].env.teacher_slots
    after = {}
    for coef, trainer in trainers.items():
        trainer.learn(last[coef])
        with torch.no_grad():
            logits, _ = trainer.policy(flat["jobs"], flat["cluster"], flat["mask"])
        dist = masked_distribution(logits, flat["mask"])
        after[coef] = teacher_cross_entropy(dist, flat["mask"], flat["teacher"], slots).item()
    assert after[10] < after[0]


def test_dual_training_updates_both_networks_and_logs_its_jct(tmp_path):
    config = load_config(None, [*TINY_GPU, "gpu.mode=dual", "policy.name=dual"])
    torch.manual_seed(config.run.seed)
    before = DualPolicy(config.policy.hidden, SLOT_FEATURES, GLOBAL_FEATURES).state_dict()
    trainer = train(config, context.init("cpu"), tmp_path, resume=False)
    after = trainer.policy.state_dict()
    assert trainer.update == 2
    assert not torch.equal(before["order.score.weight"], after["order.score.weight"])
    assert not torch.equal(before["place.score.weight"], after["place.score.weight"])
    with h5py.File(tmp_path / "metrics.h5", "r") as f:  # the score is JCT, named as such
        assert {"episode_jct", "baseline_jct"} <= set(f) and "episode_bsld" not in f


def test_evaluate_compares_with_every_heuristic_pair(tmp_path):
    run = [sys.executable, "-m", "ddppo_hpc.train", "--run-dir", str(tmp_path)]
    overrides = [*TINY_GPU, "gpu.mode=placement", "gpu.wait=true"]
    subprocess.run([*run, *overrides], check=True, capture_output=True, timeout=300)
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "agent window 1/" in out.stderr  # progress, off the table
    teacher, *out_lines = out.stdout.splitlines()
    assert teacher == "teacher: srtf+best_fit (gpu.order and gpu.reward_baseline)"
    rows = [line.split() for line in out_lines]
    assert rows[0] == ["scheduler", "windows", "avg_jct", "makespan", "avg_comm_cost",
                       "gpu_utilization", "avg_queue_delay"]  # fmt: skip
    names = [r[0] for r in rows[1:]]
    assert names[0] == "agent" and len(names) == 1 + 3 * 4 * 3
    # each rule, then waiting, then holding
    assert names[1:4] == ["fifo+first_fit", "fifo+first_fit+wait", "fifo+first_fit+hold"]
    assert {"srtf+best_fit+wait", "srtf+speed_fit", "las+random+wait"} <= set(names)
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path), "--trace", "x"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and "--trace and --out do not apply to a GPU-mode run" in out.stderr
    evaluate = [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path)]
    validation = subprocess.run(
        [*evaluate, "--split", "validation"], capture_output=True, text=True
    )
    assert validation.returncode == 0, validation.stderr
    assert validation.stdout.splitlines()[1] == out_lines[0]  # the same table
    assert validation.stdout.splitlines()[2:] != out_lines[1:]  # on other windows
    train = subprocess.run([*evaluate, "--split", "train"], capture_output=True, text=True)
    assert train.returncode == 2 and "GPU-mode run has validation and held-out" in train.stderr


# Eight 1-GPU jobs (Philly: three at 0 s, then one every 10 min) on a P100 machine (0.6)
# and a V100 (1.0) of one GPU each: the first three, A (100 s), B (10 s) and C (20 s), are
# the one training window of 3 jobs among the first five; the last three are held out.
# Mean JCT of each wait rule (s): fifo (= las: every job of one user, no service yet at
# time 0) + speed_fit: A on the V100 (100), B on the P100 (16.67), C on the P100 after B
# (50): 55.56; fifo + best_fit (the lowest index among equal slots): A on the P100
# (166.67), B and C on the V100 (10, 30): 68.89; srtf + speed_fit: B on the V100 (10), C
# on the P100 (33.33), A on the V100 at 10 (110): 51.11; srtf + best_fit: B on the P100
# (16.67), C on the V100 (20), A on the P100 at 16.67 (183.33): 73.33.
EIGHT = "timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
    f"2017-10-09 07:{m:02d}:00,{d}.0,1,{d}.0,aa\n"
    for m, d in ((0, 100), (0, 10), (0, 20), (10, 10), (20, 10), (30, 10), (40, 10), (50, 10))
)
ON_TWO_SPEEDS = [
    "gpu.mode=placement",
    "env.window_jobs=3",
    "gpu.holdout_jobs=3",
    "gpu.racks=1",
    "gpu.machines_per_rack=2",
    "gpu.gpus_per_machine=1",
    "gpu.models=P100,V100M16",
    "gpu.speed_noise=0",
    "gpu.non_blocking=true",
    "gpu.teacher=training_best",
    "gpu.order=las",
    "gpu.reward_baseline=best_fit",
]
RULES = [(o, p) for o in ORDERS for p in ("best_fit", "speed_fit")]


def config_overrides(tmp_path) -> list[str]:
    return [f"data.trace={tmp_path / 'eight.csv'}", *ON_TWO_SPEEDS]


def test_the_training_best_teacher_is_the_lowest_mean_jct_on_the_training_windows(tmp_path):
    (tmp_path / "eight.csv").write_text(EIGHT)
    config = load_config(None, config_overrides(tmp_path))
    scores = training.rule_scores(config, training.training_jobs(config))
    assert [(order, placement) for _, order, placement in scores] == [
        ("srtf", "speed_fit"),
        ("fifo", "speed_fit"),
        ("las", "speed_fit"),  # a tie with fifo keeps the orderings' order
        ("fifo", "best_fit"),
        ("las", "best_fit"),
        ("srtf", "best_fit"),
    ]
    jct = [s[0] for s in scores]
    assert jct == pytest.approx([460 / 9, 500 / 9, 500 / 9, 620 / 9, 620 / 9, 660 / 9])
    chosen = training.with_teacher(config)
    assert (chosen.gpu.order, chosen.gpu.reward_baseline) == ("srtf", "speed_fit")
    assert (config.gpu.order, config.gpu.reward_baseline) == ("las", "best_fit")  # a copy
    assert training.teacher_line(chosen) == (
        "teacher: srtf+speed_fit+wait (gpu.teacher training_best: the best on the training windows)"
    )


# Two training windows of 3 jobs on the same P100 (speed 0.6) and V100 (1.0), mean JCT (s)
# of each wait rule. Window 0, EIGHT's first three jobs x 100: srtf+speed_fit 5,111.1,
# fifo+speed_fit 5,555.6, fifo+best_fit 6,888.9, srtf+best_fit 7,333.3. Window 1, jobs
# L (100 s) and S (1 s) at 12:00, T (1 s) at 12:10 (every machine free again): fifo +
# speed_fit L on the V100 (100), S on the P100 (1.67), T on the V100 (1): 34.22; srtf +
# speed_fit S on the V100 (1), L on the P100 (166.67), T (1): 56.22; fifo + best_fit L on
# the P100 (166.67), S on the V100 (1), T on the P100 (1.67): 56.44; srtf + best_fit S on
# the P100, L on the V100, T on the P100: 34.44. The mean picks srtf+speed_fit (2,583.7
# against fifo+speed_fit's 2,794.9: window 0 decides); the geometric mean of each
# window's JCT over its best rule's picks fifo+speed_fit (sqrt(5,555.6 / 5,111.1) = 1.0426
# against sqrt(56.22 / 34.22) = 1.2818).
TWO_WINDOWS = "timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
    f"2017-10-09 {h:02d}:{m:02d}:00,{d}.0,1,{d}.0,aa\n"
    for h, m, d in (
        (7, 0, 10000), (7, 0, 1000), (7, 0, 2000), (12, 0, 100), (12, 0, 1), (12, 10, 1),
        (13, 0, 10), (13, 10, 10), (13, 20, 10),
    )
)  # fmt: skip


@pytest.mark.parametrize(
    ("teacher", "ranked", "scores"),
    [
        (
            "training_best",
            [("srtf", "speed_fit"), ("fifo", "speed_fit"), ("las", "speed_fit"),
             ("fifo", "best_fit"), ("las", "best_fit"), ("srtf", "best_fit")],
            [(46000 / 9 + 506 / 9) / 2, (50000 / 9 + 308 / 9) / 2, (50000 / 9 + 308 / 9) / 2,
             (62000 / 9 + 508 / 9) / 2, (62000 / 9 + 508 / 9) / 2, (66000 / 9 + 310 / 9) / 2],
        ),
        (
            "training_geomean",
            [("fifo", "speed_fit"), ("las", "speed_fit"), ("srtf", "best_fit"),
             ("srtf", "speed_fit"), ("fifo", "best_fit"), ("las", "best_fit")],
            [(50000 / 46000) ** 0.5, (50000 / 46000) ** 0.5, (66000 / 46000 * 310 / 308) ** 0.5,
             (506 / 308) ** 0.5, (62000 / 46000 * 508 / 308) ** 0.5,
             (62000 / 46000 * 508 / 308) ** 0.5],
        ),
    ],
)  # fmt: skip
def test_the_geometric_mean_of_ratios_lets_no_window_decide(tmp_path, teacher, ranked, scores):
    (tmp_path / "two.csv").write_text(TWO_WINDOWS)
    config = load_config(
        None, [f"data.trace={tmp_path / 'two.csv'}", *ON_TWO_SPEEDS, f"gpu.teacher={teacher}"]
    )
    found = training.rule_scores(config, training.training_jobs(config))
    assert [(order, placement) for _, order, placement in found] == ranked
    assert [s[0] for s in found] == pytest.approx(scores)
    chosen = training.with_teacher(config)
    assert (chosen.gpu.order, chosen.gpu.reward_baseline) == ranked[0]
    assert training.teacher_line(chosen) == (
        f"teacher: {'+'.join(ranked[0])}+wait (gpu.teacher {teacher}: the best on the training "
        "windows)"
    )


def test_with_the_set_aside_the_candidates_are_the_hold_rules(tmp_path):
    (tmp_path / "two.csv").write_text(TWO_WINDOWS)
    hold = ["gpu.wait=true", "gpu.set_aside=true"]
    config = load_config(None, [f"data.trace={tmp_path / 'two.csv'}", *ON_TWO_SPEEDS, *hold])
    cluster, jobs = training.cluster_of(config), training.training_jobs(config)
    expected = sorted(
        np.mean([simulate_gpu(jobs, cluster, *r, 0, f, 3, hold=True).metrics["avg_jct"]
                 for f in (0, 3)])
        for r in RULES
    )  # fmt: skip
    assert [s[0] for s in training.rule_scores(config, jobs)] == pytest.approx(expected)
    assert training.teacher_line(training.with_teacher(config)) == (
        "teacher: fifo+speed_fit+hold (gpu.teacher training_best: the best on the training windows)"
    )


def test_a_teacher_that_does_not_hold_is_chosen_among_the_wait_rules(tmp_path):
    (tmp_path / "two.csv").write_text(TWO_WINDOWS)
    rules = ["gpu.wait=true", "gpu.set_aside=true", "gpu.teacher_holds=false"]
    config = load_config(None, [f"data.trace={tmp_path / 'two.csv'}", *ON_TWO_SPEEDS, *rules])
    cluster, jobs = training.cluster_of(config), training.training_jobs(config)

    def expected_of(r):
        return np.mean([simulate_gpu(jobs, cluster, *r, 0, f, 3, wait=True).metrics["avg_jct"]
                        for f in (0, 3)])  # fmt: skip

    expected = sorted(expected_of(r) for r in RULES)
    assert [s[0] for s in training.rule_scores(config, jobs)] == pytest.approx(expected)
    best = min(RULES, key=lambda r: expected_of(r))
    assert training.teacher_line(training.with_teacher(config)) == (
        f"teacher: {'+'.join(best)}+wait (gpu.teacher training_best: the best on the training "
        "windows)"
    )


def test_the_candidates_wait_only_in_a_non_blocking_environment():
    scores = {}
    for non_blocking in (False, True):
        config = load_config(None, [*TINY_GPU, "gpu.mode=placement", "gpu.teacher=training_best",
                                    f"gpu.non_blocking={non_blocking}"])  # fmt: skip
        cluster, jobs = training.cluster_of(config), training.training_jobs(config)
        firsts = range(0, len(jobs) - 31, 32)
        runs = {r: [simulate_gpu(jobs, cluster, *r, 0, f, 32, non_blocking) for f in firsts]
                for r in RULES}  # fmt: skip
        expected = sorted(np.mean([run.metrics["avg_jct"] for run in runs[r]]) for r in RULES)
        scores[non_blocking] = [s[0] for s in training.rule_scores(config, jobs)]
        assert scores[non_blocking] == pytest.approx(expected)  # rank 0's synthetic jobs
    assert scores[False] != pytest.approx(scores[True])  # the environment's baseline's kind


def test_training_stores_the_chosen_teacher_and_evaluate_reports_it(tmp_path):
    (tmp_path / "eight.csv").write_text(EIGHT)
    run = [sys.executable, "-m", "ddppo_hpc.train", "--run-dir", str(tmp_path / "run")]
    tiny = ["env.num_envs=2", "ppo.rollout_steps=4", "ppo.minibatches=2", "ppo.updates=1"]
    trained = subprocess.run(
        [*run, *config_overrides(tmp_path), *tiny], capture_output=True, text=True, timeout=300
    )
    assert trained.returncode == 0, trained.stderr
    assert "gpu.teacher training_best: srtf+speed_fit+wait" in trained.stderr
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["config"]["gpu"]
    assert (saved["teacher"], saved["order"], saved["reward_baseline"]) == (
        "training_best",
        "srtf",
        "speed_fit",
    )
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("teacher: srtf+speed_fit+wait (gpu.teacher")


def test_a_bad_teacher_is_one_line_and_exit_2(tmp_path):
    run = [sys.executable, "-m", "ddppo_hpc.train", "--run-dir", str(tmp_path)]
    out = subprocess.run(
        [*run, *TINY_GPU, "gpu.mode=placement", "gpu.teacher=oracle"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "python -m ddppo_hpc.train: error: 'gpu.teacher' must be one of config, training_best, "
        "training_geomean"
    ]
