"""The agent's wait action in the HPC queue (env.wait; docs/environment.md, "Waiting"): by
hand on 4-proc machines, under every backfill, in imitation, resume and a training run."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from reference_sim import Job
from simhelpers import TINY_TRAINING, assert_restored_alike, trace_of

from ddppo_hpc import evaluate
from ddppo_hpc.config import ConfigError, EnvConfig, load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.dist import context
from ddppo_hpc.env import SchedulingEnv, VecSchedulingEnv
from ddppo_hpc.env.vector import JOB_FEATURES
from ddppo_hpc.sim import BACKFILLS, simulate
from ddppo_hpc.train import Trainer, train

K = 3
WAIT = K  # the wait slot follows the K job slots
T = 12 * 3600


def env_of(jobs, backfill="none", **options):
    return VecSchedulingEnv(
        trace_of(jobs, 4), 1, len(jobs), K, backfill=backfill, wait=True, **options
    )


def wait_row(gap, freed=0.0):
    """The wait slot's features: the time to the next event and the procs freed then."""
    row = np.zeros(JOB_FEATURES, dtype=np.float32)
    row[[0, 2, 6, 8]] = [min(gap / T, 1), freed, -1, min(np.log10(1 + gap) / 6, 1)]
    return row


def play(env, actions):
    """Steps `actions`; returns the last step's (observation, reward, terminated, info)."""
    for action in actions:
        obs, reward, terminated, _, info = env.step(np.array([action], dtype=np.int32))
    return obs, reward, terminated, info


# J1 (2 procs, 10 s) and J2 (2 procs, 100 s) at 0; the big J3 (4 procs, 10 s) at 5 s.
BIG_AFTER_SMALL = [Job(1, 0, 10, 2, 10, 1), Job(2, 0, 100, 2, 100, 1), Job(3, 5, 10, 4, 10, 1)]


def test_waiting_lets_the_big_job_start_first():
    env = env_of(BIG_AFTER_SMALL)
    obs, _ = env.reset()
    assert obs["jobs"].shape == (1, K + 1, JOB_FEATURES)
    assert obs["action_mask"][0].tolist() == [True, True, False, True]  # J3 is still to come
    assert np.array_equal(obs["jobs"][0, WAIT], wait_row(5))
    obs, *_ = play(env, [0])  # J1 runs 0..10
    assert obs["action_mask"][0].tolist() == [True, False, False, True]
    obs, reward, *_ = play(env, [WAIT])  # to J3's arrival at 5 s; J2 keeps waiting
    assert reward[0] == 0
    assert obs["jobs"][0, :2, 0].tolist() == [np.float32(5 / T), 0]  # J2 waited 5 s, J3 0
    assert np.array_equal(obs["jobs"][0, WAIT], wait_row(5, 0.5))  # J1 frees 2 procs at 10
    obs, *_ = play(env, [WAIT])  # to J1's end at 10 s: nothing runs, nothing is to come
    assert obs["action_mask"][0].tolist() == [True, True, False, False]
    assert not obs["jobs"][0, WAIT].any()
    obs, *_ = play(env, [1])  # J3 runs 10..20
    assert np.array_equal(obs["jobs"][0, WAIT], wait_row(10, 1.0))
    _, reward, terminated, info = play(env, [0])  # J2 is committed and starts at 20
    assert terminated[0]
    assert env.last_start_times(0).tolist() == [0, 20, 10]
    # bsld: J1 1, J2 (20 + 100) / 100, J3 (5 + 10) / 10
    assert info["avg_bsld"][0] == pytest.approx((1 + 1.2 + 1.5) / 3)
    assert info["avg_wait"][0] == pytest.approx(25 / 3)
    assert reward[0] == pytest.approx(-(1 + 1.2 + 1.5) / 3)
    # FCFS starts J2 at 0, and J3 waits for it until 100 s: (95 + 10) / 10
    fcfs = simulate(trace_of(BIG_AFTER_SMALL, 4), "fcfs", "none")
    assert fcfs.start_time.tolist() == [0, 0, 100]
    assert fcfs.metrics["avg_bsld"] == pytest.approx((1 + 1 + 10.5) / 3)


def test_the_wait_is_masked_when_nothing_runs_and_nothing_arrives():
    env = env_of([Job(1, 0, 10, 4, 10, 1), Job(2, 0, 10, 4, 10, 1)])
    obs, _ = env.reset()
    assert obs["action_mask"][0].tolist() == [True, True, False, False]
    assert not obs["jobs"][0, WAIT].any()
    obs, *_ = play(env, [WAIT])  # masked: slot 0, J1, which starts at 0
    assert obs["action_mask"][0].tolist() == [True, False, False, True]  # J1 ends at 10 s
    assert np.array_equal(obs["jobs"][0, WAIT], wait_row(10, 1.0))
    obs, *_ = play(env, [WAIT])
    assert obs["action_mask"][0].tolist() == [True, False, False, False]
    _, _, terminated, _ = play(env, [0])
    assert terminated[0] and env.last_start_times(0).tolist() == [0, 10]
    off = VecSchedulingEnv(trace_of(BIG_AFTER_SMALL, 4), 1, 3, K)
    assert off.reset()[0]["action_mask"].shape == (1, K)


@pytest.mark.parametrize("backfill", BACKFILLS)
def test_a_wait_backfills_nothing_and_a_later_commit_backfills_as_configured(backfill):
    # J1 (3 procs, 10 s) and J2 (1 proc, 4 s) at 0; J3 (4 procs, 10 s) at 2 s
    env = env_of(
        [Job(1, 0, 10, 3, 10, 1), Job(2, 0, 4, 1, 4, 1), Job(3, 2, 10, 4, 10, 1)], backfill
    )
    env.reset()
    obs, *_ = play(env, [0, WAIT])  # J1 runs 0..10; J2 fits the free proc but is not started
    assert obs["action_mask"][0].tolist() == [True, True, False, True]
    assert obs["jobs"][0, 0, 0] == np.float32(2 / T) and obs["cluster"][0, 0] == 0.25
    obs, _, terminated, _ = play(env, [1])  # J3 is committed at 2 s: the scan runs now
    if backfill == "none":  # J2 waits for J3 (10..20)
        assert not terminated[0]
        _, _, terminated, _ = play(env, [0])
    assert terminated[0]
    j2 = 20 if backfill == "none" else 2  # EASY and conservative: 2 + 4 <= J3's start at 10
    assert env.last_start_times(0).tolist() == [0, j2, 10]


def test_random_actions_wait_and_restore_mid_episode():
    trace = generate(3000, machine_procs=64, seed=5)
    env = VecSchedulingEnv(trace, 3, 120, 16, seed=5, wait=True)
    env.reset()
    rng = np.random.default_rng(2)
    waits = 0
    for _ in range(150):
        actions = env.random_actions(rng)
        assert env.mask[np.arange(3), actions].all()  # random actions are valid slots
        waits += int((actions == 16).sum())
        env.step(actions)
    assert waits > 0
    again = VecSchedulingEnv(trace, 3, 120, 16, seed=5, wait=True)
    assert_restored_alike(env, again, rng, 150)


def test_gymnasium_env_has_the_wait_action():
    env = SchedulingEnv(trace_of(BIG_AFTER_SMALL, 4), window_jobs=3, max_queue=K, wait=True)
    assert env.action_space.n == K + 1
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)


def test_env_wait_is_for_the_hpc_queue():
    assert load_config(None, ["env.wait=true"]).env.wait
    with pytest.raises(ConfigError, match="'env.wait' is for the HPC queue"):
        load_config(None, ["env.wait=true", "gpu.mode=placement"])


WAITING = [*TINY_TRAINING, "env.wait=true"]


def test_imitation_leaves_the_wait_out(tmp_path):
    config = load_config(None, [*WAITING, "ppo.imitation_updates=1"])
    trainer = Trainer(config, context.init("cpu"), tmp_path)
    assert trainer.env.teacher_slots == 16 and trainer.env.jobs.shape[1] == 17
    rollout = trainer.rollout()
    assert not trainer.storage.actions.eq(16).any()  # the teacher never waits
    assert not trainer.storage.mask[..., 16].any()  # and the wait is not cloned
    trainer.learn(rollout["last_value"])
    trainer.update = 1
    trainer.rollout()
    assert trainer.storage.mask[..., 16].any() and trainer.storage.actions.eq(16).any()


def test_resume_with_waits_equals_an_uninterrupted_run(tmp_path):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    ctx = context.init("cpu")
    train(load_config(None, [*WAITING, "ppo.updates=4"]), ctx, straight, resume=False)
    first = train(load_config(None, [*WAITING, "ppo.updates=2"]), ctx, stopped, resume=False)
    assert any(16 in actions for actions in first.env.state()["actions"])  # waits mid-episode
    resumed = train(load_config(None, [*WAITING, "ppo.updates=4"]), ctx, stopped, resume=True)
    assert resumed.update == 4
    a = torch.load(straight / "checkpoint.pt", weights_only=False)["model"]
    b = torch.load(stopped / "checkpoint.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


class AlwaysWait(torch.nn.Module):
    """Waits whenever it may (the wait slot's feature 6 is -1, a job's 1), else slot 0."""

    def forward(self, jobs, cluster, mask):
        return -jobs[..., 6], jobs.new_zeros(len(jobs))


@pytest.mark.parametrize("wait", [False, True])
def test_evaluation_plays_the_wait_as_the_run_trained(wait):
    trace = trace_of(BIG_AFTER_SMALL, 4)
    options = EnvConfig(max_queue=K, wait=wait)
    [(_, start, _)] = evaluate.run_policy(AlwaysWait(), trace, {0: (0, 3)}, options, "none")
    # waiting: to J3's arrival at 5 s (nothing runs then), J1 at 5, a wait to its end at 15,
    # J2 at 15, a wait to its end at 115, J3
    assert start.tolist() == ([5, 15, 115] if wait else [0, 0, 100])


def test_a_waiting_run_trains_and_its_checkpoint_evaluates(tmp_path):
    swf, run, results = tmp_path / "trace.swf", tmp_path / "run", tmp_path / "results.h5"
    python = [sys.executable, "-m"]
    subprocess.run([*python, "ddppo_hpc.data.synthetic", "--jobs", "3000", "--seed", "3",
                    "--out", str(swf)], check=True, timeout=300)  # fmt: skip
    subprocess.run(
        [*python, "ddppo_hpc.train", "--run-dir", str(run), *WAITING, "ppo.updates=2"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = subprocess.run(
        [*python, "ddppo_hpc.evaluate", "--checkpoint", str(run), "--trace", str(swf),
         "--policies", "ddppo,fcfs", "--backfill", "easy", "--estimate", "request",
         "--out", str(results)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "ddppo" in out.stdout
