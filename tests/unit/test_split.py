"""Splits by time: the parts' bounds, the config key, and what training draws from."""

import numpy as np
import pytest
import torch
from simhelpers import TINY_TRAINING

from ddppo_hpc.config import ConfigError, DataConfig, load_config
from ddppo_hpc.data import convert
from ddppo_hpc.data.source import (
    Source,
    at_load,
    embedded_workload,
    part_trace,
    rank_train_trace,
    sources,
)
from ddppo_hpc.data.split import describe, part_range
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.dist import context
from ddppo_hpc.evaluate import run_policy
from ddppo_hpc.sim import protocol_windows
from ddppo_hpc.train import Trainer
from ddppo_hpc.train import main as train_main


def parts(jobs, fractions=(0.7, 0.1, 0.2)):
    return [part_range(jobs, fractions, p) for p in ("train", "validation", "test")]


def test_parts_are_consecutive_and_floor_the_decimal_fractions():
    assert parts(10) == [(0, 7), (7, 8), (8, 10)]
    # 0.7 + 0.1 is 0.7999999999999999 in floats: the boundary must still be 8000.
    assert parts(10_000) == [(0, 7000), (7000, 8000), (8000, 10_000)]
    assert parts(7) == [(0, 4), (4, 5), (5, 7)]  # floor(4.9), floor(5.6)
    assert parts(5, (1.0, 0.0, 0.0)) == [(0, 5), (5, 5), (5, 5)]
    assert describe("test", 5, 5, 5, (1.0, 0.0, 0.0)) == "test part: no jobs of 5 (split 1/0/0)"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[0.8, 0.2]", "must be three fractions (train, validation, test), not [0.8, 0.2]"),
        ("[0.8, 0.1, 0.2]", "must sum to 1, not 1.1"),
        ("[0, 0.5, 0.5]", "the train fraction must be positive, not 0"),
        ("[0.9, -0.1, 0.2]", "finite and not negative"),
        ("[0.5, 0.5, x]", "must be three numbers"),
        ("0.7", "'data.split': must be three fractions (train, validation, test), not 0.7"),
    ],
)
def test_a_bad_split_names_the_key(value, message):
    with pytest.raises(ConfigError, match="'data.split'") as e:
        load_config(None, [f"data.split={value}"])
    assert message in str(e.value)


EMBEDDED = Source(None)


def test_ranks_share_out_the_train_part_and_nothing_else():
    data = DataConfig(synthetic_jobs=1000)
    whole = embedded_workload(data)
    for size in (1, 2, 3):
        blocks = [rank_train_trace(EMBEDDED, data, r, size, 1).id.tolist() for r in range(size)]
        assert sum(blocks, []) == whole.id[:700].tolist()  # contiguous, disjoint, in order


def test_a_store_rank_reads_its_block_of_the_train_part(tmp_path):
    log = tmp_path / "log.swf"
    trace = generate(100, machine_procs=16, seed=1)
    lines = [
        f"{i + 1} {int(s)} -1 {int(r)} {p} -1 -1 {p} {int(q)} -1 1 {u} 1 -1 1 -1 -1 -1"
        for i, (s, r, p, q, u) in enumerate(
            zip(trace.submit, trace.runtime, trace.procs, trace.requested_time, trace.user)
        )
    ]
    log.write_text("; MaxProcs: 16\n" + "\n".join(lines) + "\n")
    convert.convert([log], tmp_path / "ds", partitions=4)
    data = DataConfig(trace=str(tmp_path / "ds"), split=[0.5, 0.25, 0.25])
    assert rank_train_trace(sources(data)[0], data, 1, 2, 1).id.tolist() == list(range(26, 51))
    validation, bounds, total = part_trace(sources(data)[0], data, "validation")
    assert (bounds, total, validation.id.tolist()) == ((50, 75), 100, list(range(51, 76)))


def test_a_rank_block_shorter_than_an_episode_is_refused():
    data = DataConfig(synthetic_jobs=1000)
    with pytest.raises(TraceError) as e:
        rank_train_trace(EMBEDDED, data, 3, 4, 200)
    assert str(e.value).startswith(
        "synthetic: rank 3 of 4 gets 175 jobs of the train part: jobs 0 .. 699 of 1000 (split "
        "0.7/0.1/0.2), fewer than env.window_jobs (200)"
    )


def test_keep_best_keeps_the_lowest_validation_score(tmp_path, capsys):
    run = tmp_path / "run"
    overrides = [*TINY_TRAINING, "ppo.updates=6", "run.checkpoint_every=2", "run.keep_best=true"]
    assert train_main(["--run-dir", str(run), *overrides]) == 0
    scores = [
        (int(line.split()[1].rstrip(":")), float(line.split()[6]))
        for line in capsys.readouterr().err.splitlines()
        if ": validation mean avg bsld " in line
    ]
    assert [u for u, _ in scores] == [2, 4, 6]
    best_update, best_score = min(scores, key=lambda s: (s[1], s[0]))
    best = torch.load(run / "best.pt", weights_only=False)
    last = torch.load(run / "checkpoint.pt", weights_only=False)
    assert best["update"] == best_update and last["update"] == 6
    assert best["best_validation"] == pytest.approx(best_score, abs=5e-4)
    assert last["best_validation"] == best["best_validation"]


def test_validation_scores_every_source_and_load_on_eval_jobs_windows(tmp_path):
    overrides = [*TINY_TRAINING, "data.load_scale=[0.5, 1.0]", "run.eval_windows=2"]
    config = load_config(None, [*overrides, "run.eval_jobs=100"])
    trainer = Trainer(config, context.init("cpu"), tmp_path)
    part = part_trace(sources(config.data)[0], config.data, "validation")[0]
    scores = []
    for factor in (0.5, 1.0):
        trace = at_load(part, factor)
        spans = dict(enumerate(protocol_windows(len(trace), 0, 2, 100)))
        runs = run_policy(trainer.policy, trace, spans, config.env, config.env.backfill)
        scores.append(np.mean([metrics["avg_bsld"] for _, _, metrics in runs]))
    assert scores[0] != scores[1]  # the loads differ
    assert trainer.validate()[0] == pytest.approx(np.sqrt(scores[0] * scores[1]), rel=1e-12)
