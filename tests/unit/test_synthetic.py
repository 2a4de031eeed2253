"""The embedded synthetic workload (ddppo_hpc.data.synthetic) and its SWF writer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddppo_hpc.data import clean, read_swf, synthetic

COLUMNS = ("id", "submit", "runtime", "requested_time", "procs", "user", "group", "queue")


def assert_same_trace(a, b) -> None:
    assert len(a) == len(b)
    assert a.machine_procs == b.machine_procs
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.fixture(scope="module")
def big():
    return synthetic.generate(20_000, machine_procs=256, seed=7)


def test_same_seed_gives_identical_columns():
    assert_same_trace(synthetic.generate(2_000, seed=3), synthetic.generate(2_000, seed=3))


def test_different_seeds_differ():
    a, b = synthetic.generate(2_000, seed=1), synthetic.generate(2_000, seed=2)
    for name in ("submit", "runtime", "requested_time", "procs", "user"):
        assert not np.array_equal(getattr(a, name), getattr(b, name)), name


CHUNKED_JOBS = synthetic.CHUNK_JOBS + 1_000


@pytest.fixture(scope="module")
def chunks():
    return list(synthetic.generate_chunks(CHUNKED_JOBS, machine_procs=64, users=16, seed=11))


def test_chunks_hold_the_core_columns(chunks):
    assert [len(c["id"]) for c in chunks] == [synthetic.CHUNK_JOBS, 1_000]
    for chunk in chunks:
        assert {name: chunk[name].dtype for name in COLUMNS} == {
            **dict.fromkeys(COLUMNS, np.dtype(np.int64)),
            "submit": np.dtype(np.float64),
            "runtime": np.dtype(np.float64),
            "requested_time": np.dtype(np.float64),
            "procs": np.dtype(np.int32),
        }


def test_chunks_concatenate_to_the_trace(chunks):
    trace = synthetic.generate(CHUNKED_JOBS, machine_procs=64, seed=11, users=16)
    check_invariants(trace, CHUNKED_JOBS, 64, users=16)
    for name in COLUMNS:
        joined = np.concatenate([c[name] for c in chunks])
        np.testing.assert_array_equal(joined, getattr(trace, name), err_msg=name)


def test_submit_does_not_go_back_across_chunks(chunks):
    first, second = chunks
    assert first["submit"][0] == 0
    assert second["submit"][0] >= first["submit"][-1]
    assert second["id"][0] == first["id"][-1] + 1


def test_offered_load_stays_near_the_target_across_chunks(chunks):
    work = sum(np.dot(c["procs"].astype(np.float64), c["runtime"]) for c in chunks)
    load = work / (64 * chunks[-1]["submit"][-1])
    assert abs(load - synthetic.TARGET_LOAD) < 0.01


def test_chunks_depend_only_on_the_arguments():
    def chunks(seed):
        return synthetic.generate_chunks(5_000, machine_procs=32, users=8, seed=seed)

    for a, b in zip(chunks(4), chunks(4), strict=True):  # consumed in lockstep
        for name in COLUMNS:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    (a,), (b,) = chunks(4), chunks(5)
    for name in ("submit", "runtime", "requested_time", "procs", "user"):
        assert not np.array_equal(a[name], b[name]), name


def check_invariants(trace, jobs: int, machine_procs: int, users: int = synthetic.USERS) -> None:
    assert len(trace) == jobs
    assert trace.machine_procs == machine_procs
    assert trace.dropped == {"negative_runtime": 0, "no_procs": 0, "too_large": 0}
    np.testing.assert_array_equal(trace.id, np.arange(1, jobs + 1))
    assert trace.submit[0] == 0
    assert np.all(np.diff(trace.submit) >= 0)
    assert np.all((trace.procs >= 1) & (trace.procs <= machine_procs))
    assert np.all(trace.runtime >= 1)
    assert np.all(trace.runtime <= synthetic.MAX_RUNTIME)
    assert np.all(trace.requested_time >= trace.runtime)
    assert np.all(np.isin(trace.requested_time, synthetic.ESTIMATE_VALUES))
    for name in ("submit", "runtime"):
        values = getattr(trace, name)
        np.testing.assert_array_equal(values, np.floor(values), err_msg=name)
    assert np.all((trace.user >= 1) & (trace.user <= users))
    np.testing.assert_array_equal(trace.group, (trace.user - 1) % synthetic.GROUPS)
    assert np.all(trace.queue == 0)


def test_invariants(big):
    check_invariants(big, 20_000, 256)


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.integers(1, 300),
    machine_procs=st.integers(1, 4096),
    users=st.integers(1, 200),
    seed=st.integers(0, 2**32),
)
def test_invariants_hold_for_any_machine(jobs, machine_procs, users, seed):
    trace = synthetic.generate(jobs, machine_procs, seed, users=users)
    check_invariants(trace, jobs, machine_procs, users)


def test_sizes_are_mostly_powers_of_two(big):
    procs = big.procs
    assert np.mean((procs & (procs - 1)) == 0) > 0.75
    assert procs.max() > 64  # the upper stage reaches big jobs


def test_without_habits_the_serial_fraction_is_lublins(monkeypatch):
    monkeypatch.setattr(synthetic, "HABIT_PROB", 0.0)
    trace = synthetic.generate(20_000, machine_procs=256, seed=7)
    assert abs(np.mean(trace.procs == 1) - synthetic.SERIAL_PROB) < 0.015


def test_activity_is_skewed(big):
    counts = np.sort(np.bincount(big.user, minlength=synthetic.USERS + 1)[1:])[::-1]
    assert counts[: synthetic.USERS // 10].sum() > 0.4 * len(big)
    assert np.argmax(np.bincount(big.user)) == 1  # user 1 is the most active


def test_users_keep_their_preferred_size(big):
    for user in np.argsort(np.bincount(big.user))[::-1][:5]:
        mine = big.procs[big.user == user]
        sizes, counts = np.unique(mine, return_counts=True)
        size = sizes[np.argmax(counts)]
        share = counts.max() / len(mine)
        assert share > synthetic.HABIT_PROB - 0.1, user
        assert share > 1.5 * np.mean(big.procs[big.user != user] == size), user


def spread_of_user_medians(values, user, top_users):
    return np.std([np.median(values[user == u]) for u in top_users])


@pytest.mark.parametrize("column", ["procs", "runtime", "accuracy"])
def test_users_differ_more_than_chance(big, column):
    values = big.runtime / big.requested_time if column == "accuracy" else getattr(big, column)
    top_users = np.argsort(np.bincount(big.user))[::-1][:10]
    shuffled = np.random.default_rng(0).permutation(big.user)
    actual = spread_of_user_medians(values, big.user, top_users)
    assert actual > 3 * spread_of_user_medians(values, shuffled, top_users)


def test_more_arrivals_in_working_hours_than_at_night(big):
    per_hour = np.bincount((big.submit % 86400 // 3600).astype(np.int64), minlength=24)
    assert per_hour[10:18].mean() > 2 * per_hour[1:7].mean()


def test_larger_jobs_run_longer(big):
    serial = np.median(big.runtime[big.procs == 1])
    wide = np.median(big.runtime[big.procs >= 32])
    assert wide > 10 * serial


def test_offered_load_is_near_the_target(big):
    span = big.submit[-1] - big.submit[0]
    load = np.dot(big.procs, big.runtime) / (big.machine_procs * span)
    assert 0.6 < load < 0.9


def test_rejects_bad_arguments():
    for kwargs in (
        {"jobs": 0},
        {"jobs": 5, "machine_procs": 0},
        {"jobs": 5, "seed": -1},
        {"jobs": 5, "users": 0},
    ):
        with pytest.raises(ValueError):
            synthetic.generate(**kwargs)
        with pytest.raises(ValueError):
            synthetic.generate_chunks(**kwargs)  # at once, before the first chunk


def test_write_swf_round_trip(tmp_path):
    trace = synthetic.generate(3_000, machine_procs=128, seed=5)
    path = tmp_path / "synthetic.swf"
    synthetic.write_swf(trace, path)
    header = [line for line in path.read_text().splitlines() if line.startswith(";")]
    assert "; MaxProcs: 128" in header
    assert any(line.startswith("; Note: generated by ddppo-hpc") for line in header)
    assert_same_trace(read_swf(path), trace)
    assert [p.name for p in tmp_path.iterdir()] == ["synthetic.swf"]  # no temporary left


def test_write_swf_keeps_fractional_times_and_replaces_the_file(tmp_path):
    trace = clean(
        {
            "id": np.array([1, 2]),
            "submit": np.array([0.1, 2.5]),
            "runtime": np.array([3.25, 0]),
            "allocated_procs": np.array([4, 1]),
            "requested_procs": np.array([-1, 2]),
            "requested_time": np.array([10.0, -1]),
        },
        machine_procs=8,
    )
    path = tmp_path / "t.swf"
    path.write_text("old contents\n")
    synthetic.write_swf(trace, path)
    assert_same_trace(read_swf(path), trace)


def test_cli_writes_the_file(tmp_path, capsys):
    out = tmp_path / "w.swf"
    argv = ["--jobs", "500", "--procs", "64", "--users", "5", "--seed", "9", "--out", str(out)]
    assert synthetic.main(argv) == 0
    assert_same_trace(read_swf(out), synthetic.generate(500, machine_procs=64, seed=9, users=5))
    assert "500 jobs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["--jobs", "0"],
        ["--jobs", "ten"],
        ["--jobs", "5", "--procs", "0"],
        ["--jobs", "5", "--seed", "-1"],
        ["--jobs", "5", "--users", "0"],
        [],
    ],
)
def test_cli_rejects_bad_values(tmp_path, capsys, argv):
    out = tmp_path / "w.swf"
    with pytest.raises(SystemExit) as exit_info:
        synthetic.main([*argv, "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
    assert not out.exists()
