"""advise without a live Slurm: the observation it builds from a queue equals the C++
environment's at every decision of simulated windows (bit for bit); Slurm 22.05 snapshots
(tests/data/advise/, captured from the live fixture) parse into the queue they show; the
order, the priorities, and bad input (one line naming the file and field, exit 2)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from simhelpers import TINY_TRAINING, train_run

from ddppo_hpc.advise import cli
from ddppo_hpc.advise.queue import Pending, Queue, Running, observation
from ddppo_hpc.advise.slurm import read_snapshot
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.evaluate import load_checkpoint, run_config, trained_policy

DATA = Path(__file__).resolve().parents[1] / "data" / "advise"


def decision_queues(trace, begin: int, window: int, picks: list[int], starts: np.ndarray):
    """The Queue at each decision of an episode without backfilling: decision k+1 comes when
    pick k starts, or at the next arrival when nothing else waits; the waiting jobs are the
    arrivals not picked, the running ones the picked jobs not ended (docs/simulation.md,
    "Decision model")."""
    jobs = range(begin, begin + window)
    picked: list[int] = []
    now = float(trace.submit[begin])
    for pick in picks:
        waiting = [j for j in jobs if j not in picked and trace.submit[j] <= now]
        running = [
            Running(j, int(trace.procs[j]), int(trace.user[j]),
                    starts[j - begin] + float(trace.requested_time[j]))
            for j in picked
            if starts[j - begin] + trace.runtime[j] > now
        ]  # fmt: skip
        busy = sum(r.procs for r in running)
        pending = [
            Pending(j, float(trace.submit[j]), float(trace.requested_time[j]),
                    int(trace.procs[j]), int(trace.user[j]))
            for j in waiting
        ]  # fmt: skip
        yield Queue(now, trace.machine_procs, trace.machine_procs - busy, pending, running, [])
        picked.append(waiting[pick])
        rest = [j for j in jobs if j not in picked]
        if rest:
            start = starts[picked[-1] - begin]
            now = start if trace.submit[rest[0]] <= start else float(trace.submit[rest[0]])


@pytest.mark.parametrize("max_queue", [4, 64])  # hidden jobs past slot K; every job seen
@pytest.mark.parametrize("wait", [False, True])
def test_observation_equals_the_environments_at_every_decision(max_queue, wait):
    trace = generate(600, machine_procs=32, seed=7)  # heavy enough that queues build up
    window = 120
    env = VecSchedulingEnv(trace, 1, window, max_queue, backfill="none", seed=3, wait=wait)
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    seen, picks, terminated = [], [], [False]
    while not terminated[0]:
        seen.append({k: v.copy() for k, v in obs.items()})
        mask = obs["action_mask"][0, :max_queue]  # job slots only: never the wait
        picks.append(int(rng.choice(np.flatnonzero(mask))))
        obs, _, terminated, _, info = env.step(np.array(picks[-1:], dtype=np.int32))
    begin = int(info["episode_start"][0])
    starts = env.last_start_times(0)
    queues = list(decision_queues(trace, begin, window, picks, starts))
    assert max(len(q.pending) for q in queues) > max_queue or max_queue == 64
    for expected, queue in zip(seen, queues, strict=True):
        built = observation(queue, max_queue, wait)
        assert np.array_equal(built["cluster"], expected["cluster"])
        assert np.array_equal(built["jobs"][:, :max_queue], expected["jobs"][:, :max_queue])
        assert np.array_equal(
            built["action_mask"][:, :max_queue], expected["action_mask"][:, :max_queue]
        )
        if wait:  # advise never waits: its wait slot is masked padding
            assert not built["action_mask"][0, max_queue] and not built["jobs"][0, max_queue].any()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A 1-update run of the tiny training config (K = 16)."""
    run = tmp_path_factory.mktemp("advise") / "run"
    train_run(run, *TINY_TRAINING, "ppo.updates=1")
    return run


def test_a_slurm_snapshot_is_the_queue_it_shows():
    # tests/data/advise/busy.json: squeue/sinfo --json of Slurm 22.05 on a 2-CPU node, job 1
    # (2 CPUs, 2 min) running since 1796185195; every other job submitted then, pending.
    queue = read_snapshot(str(DATA / "busy.json"))
    assert (queue.now, queue.machine_procs, queue.free_procs) == (1796185281, 2, 0)
    assert queue.running == [Running(1, 2, 0, 1796185195 + 120)]
    shown = [(j.job_id, j.submit, j.requested_time, j.procs, j.user) for j in queue.pending]
    assert shown == [
        (2, 1796185195, 300, 1, 0),  # -n 1 --time=5
        (3, 1796185195, 180, 2, 65534),  # -n 2 --time=3 --uid=nobody
        (9, 1796185195, 420, 1, 0),  # -n 1 --exclusive --time=7: the CPUs it asked for
    ]
    assert queue.left_alone == [
        (4, "no time limit"),  # no --time, in a partition with MaxTime=INFINITE
        (5, "array not yet split"),  # --array=0-2
        (6, "held"),  # -H
        (7, "heterogeneous job"),  # its two components
        (8, "heterogeneous job"),
    ]


def test_the_order_is_the_policys_with_the_heuristic_ranks_beside_it(run_dir):
    loaded = load_checkpoint(run_dir)
    config = run_config(loaded)
    policy = trained_policy(loaded, config, cli.JOB_FEATURES, cli.CLUSTER_FEATURES)
    queue = read_snapshot(str(DATA / "busy.json"))
    advice = cli.advise(queue, policy, config.env)
    obs = observation(queue, 16)
    with torch.no_grad():
        logits, _ = policy(*(torch.from_numpy(obs[k]) for k in ("jobs", "cluster", "action_mask")))
    probs = torch.softmax(logits[0, :3], dim=0)
    assert advice.scores == pytest.approx(probs.tolist())
    assert advice.order == sorted(range(3), key=lambda k: -probs[k])
    # SJF: 180 s (job 3), 300 s (2), 420 s (9). F1 (equal submits): log10(r) * n is 2.48
    # (job 2), 4.51 (3), 2.62 (9).
    assert advice.sjf_rank == [1, 0, 2] and advice.f1_rank == [0, 2, 1]


def test_jobs_past_slot_k_follow_the_scored_ones_in_queue_order(run_dir):
    loaded = load_checkpoint(run_dir)
    config = run_config(loaded)
    policy = trained_policy(loaded, config, cli.JOB_FEATURES, cli.CLUSTER_FEATURES)
    pending = [Pending(j, 100.0 + j, 60.0 * (20 - j), 1 + j % 4, j % 3) for j in range(20)]
    queue = Queue(1000.0, 8, 2, pending, [Running(99, 6, 1, 2000.0)], [])
    advice = cli.advise(queue, policy, config.env)  # K = 16
    assert sorted(advice.order[:16]) == list(range(16)) and advice.order[16:] == [16, 17, 18, 19]
    assert all(s is not None for s in advice.scores[:16]) and advice.scores[16:] == [None] * 4


def test_a_queue_without_pending_jobs_has_no_decision(run_dir):
    loaded = load_checkpoint(run_dir)
    config = run_config(loaded)
    policy = trained_policy(loaded, config, cli.JOB_FEATURES, cli.CLUSTER_FEATURES)
    advice = cli.advise(Queue(10.0, 4, 0, [], [Running(1, 4, 0, 70.0)], []), policy, config.env)
    assert (advice.order, advice.scores, cli.priorities(advice)) == ([], [], [])


def test_priorities_are_the_ordered_jobs_own_largest_first():
    def given(priorities, order):
        pending = [Pending(j, 0.0, 60.0, 1, 0, p) for j, p in enumerate(priorities)]
        advice = cli.Advice(Queue(0.0, 4, 4, pending, [], []), order, [], [], [])
        return [(job.job_id, p) for job, p in cli.priorities(advice)]

    assert given([30, 20, 10], [2, 0, 1]) == [(2, 30), (0, 20), (1, 10)]
    assert given([7, 7, 3], [1, 2, 0]) == [(1, 7), (2, 6), (0, 3)]  # ties made distinct
    assert given([1, 1], [1, 0]) == [(1, 2), (0, 1)]  # never 0: that would hold a job


def write(path: Path, snapshot) -> str:
    path.write_text(snapshot if isinstance(snapshot, str) else json.dumps(snapshot))
    return str(path)


def busy() -> dict:
    return json.loads((DATA / "busy.json").read_text())


def broken(change) -> dict:
    snapshot = busy()
    change(snapshot)
    return snapshot


BAD_SNAPSHOTS = [
    ("", "empty"),
    ('{"now": 1,', "not JSON"),
    ([], "snapshot: not an object"),
    ({}, "snapshot.now: missing"),
    ({"now": 1, "squeue": {}}, "snapshot.sinfo: missing"),
    (broken(lambda s: s.pop("squeue")), "snapshot.squeue: missing"),
    (broken(lambda s: s["squeue"]["jobs"][2].pop("cpus")), "squeue.jobs[2].cpus: missing"),
    (broken(lambda s: s["squeue"]["jobs"][1].update(cpus="1")), 'squeue.jobs[1].cpus: "1"'),
    (broken(lambda s: s["squeue"]["jobs"][0].update(time_limit=-2)), "jobs[0].time_limit: -2"),
    (broken(lambda s: s["squeue"]["jobs"][1].update(cpus=0)), "squeue.jobs[1].cpus: 0 (a job"),
    (broken(lambda s: s["sinfo"].update(nodes=[])), "sinfo.nodes: no node up (0 listed)"),
    (broken(lambda s: s.update(now="today")), 'snapshot.now: "today" is not a number'),
]


@pytest.mark.parametrize("snapshot, named", BAD_SNAPSHOTS)
def test_a_bad_snapshot_is_one_line_naming_the_file_and_field(
    run_dir, tmp_path, capsys, snapshot, named
):
    path = write(tmp_path / "snapshot.json", snapshot)
    assert cli.main(["--checkpoint", str(run_dir), "--from-json", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"python -m ddppo_hpc.advise: error: {path}: ") and named in err


def test_a_checkpoint_advise_cannot_serve_is_refused_by_name(run_dir, tmp_path, capsys):
    args = ["--from-json", str(DATA / "busy.json"), "--checkpoint"]
    assert cli.main([*args, str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.endswith("none: no checkpoint\n")
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    checkpoint["config"]["env"]["history"] = True
    torch.save(checkpoint, tmp_path / "history.pt")
    assert cli.main([*args, str(tmp_path / "history.pt")]) == 2
    assert "history.pt: env.history: advise cannot build" in capsys.readouterr().err
    checkpoint["config"]["env"].update(history=False, heuristic_ranks=True)
    torch.save(checkpoint, tmp_path / "ranks.pt")
    assert cli.main([*args, str(tmp_path / "ranks.pt")]) == 2
    assert "ranks.pt: env.heuristic_ranks: advise cannot build" in capsys.readouterr().err
    checkpoint["config"]["env"].update(heuristic_ranks=False, fit_times=True)
    torch.save(checkpoint, tmp_path / "fit.pt")
    assert cli.main([*args, str(tmp_path / "fit.pt")]) == 2
    assert "fit.pt: env.fit_times: advise cannot build" in capsys.readouterr().err


def test_apply_and_interval_need_the_live_queue(capsys):
    for flag in (["--apply"], ["--interval", "5"]):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["--checkpoint", "x", "--from-json", "y", *flag])
        assert stopped.value.code == 2
        assert "act on the live queue" in capsys.readouterr().err


def test_the_command_line_prints_the_order_and_ends_quietly_on_bad_input(run_dir, tmp_path):
    command = [sys.executable, "-m", "ddppo_hpc.advise", "--checkpoint", str(run_dir)]
    done = subprocess.run(
        [*command, "--from-json", str(DATA / "busy.json")], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{DATA / 'busy.json'} at 2026-12-02T04:21:21Z: 3 pending to order")
    assert sorted(line.split()[1] for line in lines[2:5]) == ["2", "3", "9"]
    assert lines[5].startswith("left alone: 4 (no time limit), 5 (array not yet split)")
    empty = write(tmp_path / "empty.json", "")
    done = subprocess.run(
        [*command, "--from-json", empty], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    snapshot = '{"now", "squeue", "sinfo"}'
    assert (
        done.stderr
        == f"python -m ddppo_hpc.advise: error: {empty}: empty (a snapshot is {snapshot})\n"
    )
