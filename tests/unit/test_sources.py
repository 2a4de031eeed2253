"""Training on several trace sources and loads (data.trace as a weighted list,
data.load_scale): the config, the share-out of environments, the mixed batch against its
groups run alone, and a size-1 run that resumes to the weights of an uninterrupted one."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from simhelpers import TINY_TRAINING, straight_and_resumed

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.data.source import Source, at_load, rank_train_trace, sources
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import EPISODE_METRICS, VecSchedulingEnv
from ddppo_hpc.env.mixed import MixedVecEnv, dealt, shares
from ddppo_hpc.sim import simulate
from ddppo_hpc.train import make_env

TRAIN = [sys.executable, "-m", "ddppo_hpc.train"]


def write_swf(path, jobs: int, procs: int, seed: int) -> str:
    subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.data.synthetic", "--jobs", str(jobs), "--seed",
         str(seed), "--procs", str(procs), "--out", str(path)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return str(path)


def test_sources_from_yaml_and_overrides(tmp_path):
    config = tmp_path / "mixed.yaml"
    config.write_text(
        "data:\n  trace:\n    - a.swf\n    - {path: store/, weight: 3}\n    - synthetic\n"
        "  load_scale: [0.7, 1.0]\n"
    )
    data = load_config(config).data
    assert sources(data) == [Source("a.swf", 1.0), Source("store/", 3.0), Source(None, 1.0)]
    assert data.load_scale == [0.7, 1.0]
    assert sources(load_config(None, ["data.trace=b.swf"]).data) == [Source("b.swf", 1.0)]
    assert sources(load_config(None, []).data) == [Source(None, 1.0)]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.trace=[]", "'data.trace': must name a trace source, not an empty list"),
        ("data.trace=[{path: a.swf, weigth: 2}]", "the keys path and weight only"),
        ("data.trace=[{path: a.swf, weight: 0}]", "the weight of a.swf must be a positive"),
        ("data.trace=[{path: a.swf, weight: x}]", "the weight of a.swf must be a positive"),
        ("data.trace=[a.swf, 3]", "a source is a path or 'synthetic', not 3"),
        ("data.load_scale=0.7", "'data.load_scale': must be a list of positive"),
        ("data.load_scale=[0.7, -1]", "'data.load_scale': must be a list of positive"),
        ("data.load_scale=[]", "'data.load_scale': must be a list of positive"),
    ],
)
def test_bad_sources_name_the_key(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert message in str(e.value)


def test_more_sources_than_environments_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"lists 3 sources: 'env.num_envs' \(2\) must give"):
        load_config(None, ["data.trace=[a.swf, b.swf, c.swf]", "env.num_envs=2"])


def test_gpu_mode_takes_one_source():
    with pytest.raises(ConfigError, match="are for the HPC queue"):
        load_config(None, ["gpu.mode=placement", "data.load_scale=[0.5, 1]"])


def test_environments_shared_out_by_weight_then_dealt_by_load():
    assert shares([2, 1], 16) == [11, 5]  # 10.67 and 5.33: the larger remainder gets one
    assert shares([1, 1, 1], 16) == [6, 5, 5]  # equal remainders: the earlier entry
    assert shares([100, 1], 4) == [3, 1]  # every source gets one, from the largest share
    with pytest.raises(ValueError, match="3 sources need as many environments, not 2"):
        shares([1, 1, 1], 2)
    assert dealt(5, [0.5, 1.0]) == [(0.5, 3), (1.0, 2)]
    assert dealt(1, [0.5, 1.0]) == [(0.5, 1)]


def test_a_mixed_batch_steps_as_its_groups_alone():
    a = generate(2000, machine_procs=64, seed=1)
    b = at_load(generate(2000, machine_procs=128, seed=2), 0.6)
    options = dict(window_jobs=80, max_queue=80, backfill="easy", policy="sjf")
    mixed = MixedVecEnv(
        [VecSchedulingEnv(a, 2, seed=5, **options), VecSchedulingEnv(b, 3, seed=7, **options)]
    )
    alone = [VecSchedulingEnv(a, 2, seed=5, **options), VecSchedulingEnv(b, 3, seed=7, **options)]
    obs, _ = mixed.reset()
    for env in alone:
        env.reset()
    checked = 0
    for step in range(400):
        if step == 150:  # mid-episode: a restored batch goes on as the original
            restored = MixedVecEnv([VecSchedulingEnv(t, n, seed=s, **options) for t, n, s in
                                    ((a, 2, 5), (b, 3, 7))])  # fmt: skip
            restored.reset()
            restored.load_state(mixed.state())
            assert all(np.array_equal(x, y) for x, y in zip(
                restored._gather().values(), mixed._gather().values()))  # fmt: skip
            mixed = restored
        actions = mixed.heuristic_actions()
        obs, reward, terminated, _, info = mixed.step(actions)
        parts = [env.step(env.heuristic_actions()) for env in alone]
        assert np.array_equal(obs["jobs"], np.concatenate([p[0]["jobs"] for p in parts]))
        assert np.array_equal(reward, np.concatenate([p[1] for p in parts]))
        for i in np.flatnonzero(terminated):
            start = int(info["episode_start"][i])
            expected = simulate(mixed.window_trace(i), "sjf", "easy", start, 80)
            assert [info[m][i] for m in EPISODE_METRICS] == [
                expected.metrics[m] for m in EPISODE_METRICS
            ]
            checked += 1
    assert mixed.window_trace(1) is a and mixed.window_trace(2) is b
    assert checked >= 5


def test_make_env_groups_sources_and_loads_with_contiguous_seeds(tmp_path):
    small = write_swf(tmp_path / "small.swf", 3000, 32, seed=4)
    overrides = [*TINY_TRAINING, f"data.trace=[synthetic, {{path: {small}, weight: 3}}]"]
    config = load_config(None, [*overrides, "data.load_scale=[0.5, 1.0]", "env.num_envs=8"])
    env = make_env(config, rank=1, size=2)
    # weights 1:3 of 8 -> 2 and 6 environments; each dealt over the two loads
    assert [g.num_envs for g in env.groups] == [1, 1, 3, 3]
    embedded = rank_train_trace(Source(None), config.data, 1, 2, 64)
    assert np.array_equal(env.groups[0].trace.submit, embedded.submit * 0.5)
    assert np.array_equal(env.groups[1].trace.submit, embedded.submit)
    assert [g.trace.machine_procs for g in env.groups] == [256, 256, 32, 32]
    # environment i has seed run.seed + rank * num_envs + i, as with one source: 8, 9, 10..
    _, info = env.reset()
    for group, first in zip(env.groups, (8, 9, 10, 13)):
        alone = VecSchedulingEnv(group.trace, group.num_envs, 64, 16, seed=first)
        rows = slice(first - 8, first - 8 + group.num_envs)
        assert np.array_equal(alone.reset()[1]["episode_start"], info["episode_start"][rows])


def test_a_mixed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    small = write_swf(tmp_path / "small.swf", 3000, 32, seed=4)
    options = [*TINY_TRAINING, f"data.trace=[synthetic, {small}]", "data.load_scale=[0.6, 1]"]
    a, b = straight_and_resumed(tmp_path, options, stop=2)
    assert b["update"] == 4
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
