"""advise on the live Slurm of the `slurm` fixture (no stand-ins): with the node busy, six
pending jobs of different sizes and time limits from two users; advise without --apply
changes no priority; with --apply, when the node frees, Slurm starts the jobs in the order
advise printed. Every job is --exclusive, so they start one by one whatever their size
(the policy sees the CPUs each asked for). A snapshot of that queue replays to the same
order; a broken or empty one is one line and exit 2."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from simhelpers import TINY_TRAINING, train_run

from ddppo_hpc.advise import cli

SECOND_USER = "nobody"  # every Debian system has it; sbatch --uid needs root


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A 1-update run of the tiny training config (K = 16: all six jobs are visible)."""
    run = tmp_path_factory.mktemp("advise-live") / "run"
    train_run(run, *TINY_TRAINING, "ppo.updates=1")
    return run


def sbatch(slurm, *args: str) -> int:
    out = slurm.run("sbatch", "--parsable", "--exclusive", "-o", "/dev/null", "--chdir", "/tmp",
                    *args).stdout  # fmt: skip
    return int(out.strip().split(";")[0])


def jobs(slurm) -> dict[int, dict]:
    """squeue --json's jobs by id (22.05 lists finished ones too)."""
    return {j["job_id"]: j for j in json.loads(slurm.run("squeue", "--json").stdout)["jobs"]}


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {seconds} s"
        time.sleep(0.3)


def order_of(stdout: str) -> list[int]:
    """The job ids of advise's table, first to start first."""
    rows = [line.split() for line in stdout.splitlines()[2:]]
    return [int(row[1]) for row in rows if row and row[0].isdigit()]


@pytest.fixture
def advise(slurm, checkpoint, monkeypatch, capsys):
    """Runs advise's command line here (its squeue, sinfo and scontrol reach the fixture's
    Slurm): (exit code, stdout, stderr)."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])

    def call(*args: str) -> tuple[int, str, str]:
        code = cli.main(["--checkpoint", str(checkpoint), *args])
        return (code, *capsys.readouterr())

    return call


@pytest.fixture(scope="module")
def busy_queue(slurm):
    """A job holding every CPU, then six pending ones: sizes 1 .. CPUs in turn, time limits
    1 .. 6 minutes in a shuffled order, root's and nobody's in turn."""
    if os.getuid() != 0:
        pytest.skip(f"jobs of a second user ({SECOND_USER}) need root (sbatch --uid)")
    slurm.drain()
    blocker = sbatch(slurm, "-n", str(slurm.cpus), "--time=2", "--wrap", "sleep 60")
    wait_until(lambda: jobs(slurm)[blocker]["job_state"] == "RUNNING", 30, "running blocker")
    pending = []
    for k, limit in enumerate([4, 1, 6, 2, 5, 3]):
        user = ["--uid", SECOND_USER] if k % 2 else []
        size = str(1 + k % slurm.cpus)
        pending.append(sbatch(slurm, *user, "-n", size, f"--time={limit}", "--wrap", "sleep 1"))
    yield blocker, pending
    slurm.drain()


def test_advise_without_apply_changes_nothing_and_a_snapshot_replays(
    slurm, busy_queue, advise, tmp_path
):
    _, pending = busy_queue
    before = {j: jobs(slurm)[j]["priority"] for j in pending}
    code, out, _ = advise()
    assert code == 0 and sorted(order_of(out)) == pending
    assert {j: jobs(slurm)[j]["priority"] for j in pending} == before
    # The same queue saved as a snapshot replays (the waits differ by a second or so, which
    # may reorder close scores: the jobs are checked, not their order); broken or empty:
    # one line, exit 2.
    snapshot = {"now": int(time.time())}
    for command in ("squeue", "sinfo"):
        snapshot[command] = json.loads(slurm.run(command, "--json").stdout)
    saved = tmp_path / "snapshot.json"
    saved.write_text(json.dumps(snapshot))
    code, out, _ = advise("--from-json", str(saved))
    assert code == 0 and sorted(order_of(out)) == pending
    for text, named in ((json.dumps(snapshot)[:-40], "not JSON"), ("", "empty")):
        saved.write_text(text)
        code, out, err = advise("--from-json", str(saved))
        assert (code, out, err.count("\n")) == (2, "", 1) and f"{saved}: {named}" in err


def test_interval_repeats_until_sigterm_and_exits_0(slurm, checkpoint, busy_queue, tmp_path):
    log = tmp_path / "advise.log"
    command = [sys.executable, "-m", "ddppo_hpc.advise", "--checkpoint", str(checkpoint)]
    with open(log, "w") as out:
        process = subprocess.Popen([*command, "--interval", "1"], env=slurm.env, stdout=out,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            wait_until(lambda: log.read_text().count("queue at ") >= 2, 60, "second pass")
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            process.kill()
    assert process.stderr.read() == ""


def test_slurm_starts_the_jobs_in_the_order_advise_applied(slurm, busy_queue, advise):
    blocker, pending = busy_queue
    proposed = order_of(advise()[1])
    # Slurm's own order is now the reverse of advise's, so --apply has something to undo.
    for rank, job in enumerate(proposed):
        slurm.run("scontrol", "update", f"JobId={job}", f"Priority={100 + rank}")
    code, out, err = advise("--apply")
    assert code == 0, err
    order = order_of(out)
    changes = [line.split() for line in out.splitlines() if line.startswith("job ")]
    logged = {int(c[1].rstrip(":")): int(c[-1]) for c in changes}  # job N: priority A -> B
    # Their own priorities, permuted: the largest to the first; every change logged.
    expected = {job: 105 - i for i, job in enumerate(order)}
    assert {j: jobs(slurm)[j]["priority"] for j in pending} == expected
    assert logged == {j: p for j, p in expected.items() if p != 100 + proposed.index(j)}
    assert logged  # Slurm's order was the reverse of advise's: something changed
    slurm.run("scancel", str(blocker))

    def finished():
        return all(jobs(slurm)[j]["job_state"] not in ("PENDING", "RUNNING") for j in pending)

    wait_until(finished, 90, "end of the six jobs")
    started = {j: jobs(slurm)[j]["start_time"] for j in pending}
    assert sorted(pending, key=started.get) == order
    assert len(set(started.values())) == len(pending)  # one by one: no tie to break
