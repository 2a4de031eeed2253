"""The training command line: a size-1 run without mpirun, bad configuration, SIGUSR1
mid-run under mpirun -n 2 then --resume giving the weights of an uninterrupted run, and
SIGUSR1 during the setup stopping the run at its first update;
jobs/local.sh's exit status after a signal and after a failure."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import torch
from simhelpers import TINY_TRAINING

ROOT = Path(__file__).resolve().parent.parent
SMALL = [*TINY_TRAINING, "dist.preemption=false"]
TRAIN = [sys.executable, "-m", "ddppo_hpc.train"]
MPIRUN = ["mpirun", "-n", "2", "--oversubscribe"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# python -c: the training module run as by -m, with Horovod unimportable.
WITHOUT_HOROVOD = (
    "import sys; sys.modules['horovod'] = None; import runpy; "
    "runpy.run_module('ddppo_hpc.train', run_name='__main__')"
)


def train_small(run_dir, updates: int) -> None:
    """A size-1 run of `updates` updates of the SMALL setting into run_dir."""
    subprocess.run(
        [*TRAIN, "--run-dir", str(run_dir), *SMALL, f"ppo.updates={updates}"],
        check=True,
        capture_output=True,
        timeout=300,
    )


def weights(run_dir) -> dict:
    return torch.load(run_dir / "checkpoint.pt", weights_only=False)


def test_size_one_without_mpirun(tmp_path):
    out = subprocess.run(
        [*TRAIN, "--run-dir", str(tmp_path), *SMALL, "ppo.updates=2", "ppo.anneal_lr=true"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "update 2/2" in out.stderr
    assert weights(tmp_path)["update"] == 2 and len(weights(tmp_path)["ranks"]) == 1
    assert (tmp_path / "COMPLETED").read_text() == "2\n"
    # Annealed: the second update (update 1 of 2, 0-based) learns at half the rate.
    assert weights(tmp_path)["optimizer"]["param_groups"][0]["lr"] == 3e-4 / 2


def test_size_one_needs_no_horovod(tmp_path):
    """A single-rank run imports no Horovod (here unimportable) and learns the same weights."""
    args = [*SMALL, "ppo.updates=2"]
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_HOROVOD, "--run-dir", str(tmp_path / "a"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    train_small(tmp_path / "b", 2)
    a, b = weights(tmp_path / "a")["model"], weights(tmp_path / "b")["model"]
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_ranks_without_horovod_are_one_line_and_exit_2(tmp_path):
    out = subprocess.run(
        [*MPIRUN, sys.executable, "-c", WITHOUT_HOROVOD, "--run-dir", str(tmp_path), *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert out.returncode != 0
    assert "error: 2 ranks average their gradients with Horovod, which does not" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_configuration_is_one_line_and_exit_2(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("ppo:\n  lrate: 0.1\n")
    out = subprocess.run(
        [*TRAIN, "--config", str(config)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"python -m ddppo_hpc.train: error: {config}: unknown")
    assert "Traceback" not in out.stderr


def test_signal_then_resume_equals_an_uninterrupted_run(tmp_path):
    # Rank 0 runs 10x slower so that the signal lands mid-run; sleeping changes no result.
    options = [*SMALL, "ppo.updates=10", "dist.slow_rank=0", "dist.slow_factor=10"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    subprocess.run(
        [*MPIRUN, *TRAIN, "--run-dir", str(straight), *options],
        env=ENV,
        check=True,
        capture_output=True,
        timeout=300,
    )
    run = subprocess.Popen(
        [*MPIRUN, *TRAIN, "--run-dir", str(stopped), *options],
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in run.stderr:
        if line.startswith("update 3/"):
            run.send_signal(signal.SIGUSR1)  # mpirun forwards SIGUSR1 to every rank
            break
    rest = run.stderr.read()
    assert run.wait(timeout=120) == 0, rest
    assert "stopped by signal" in rest
    assert 3 <= weights(stopped)["update"] < 10
    assert not (stopped / "COMPLETED").exists()
    resumed = subprocess.run(
        [*MPIRUN, *TRAIN, "--run-dir", str(stopped), "--resume"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    a, b = weights(straight), weights(stopped)
    assert b["update"] == 10 and (stopped / "COMPLETED").read_text() == "10\n"
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


# A size-1 run that signals itself while its configuration loads, before any rank trains:
# the signal Slurm's --signal sends as early as it likes.
SIGNAL_IN_SETUP = """
import os, signal, sys
from ddppo_hpc import train
load = train.run_config
def signalled(*args):
    os.kill(os.getpid(), signal.SIGUSR1)
    return load(*args)
train.run_config = signalled
sys.exit(train.main(sys.argv[1:]))
"""


def test_signal_during_setup_stops_at_the_first_update(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", SIGNAL_IN_SETUP, "--run-dir", str(tmp_path), *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "stopped by signal at update 1" in out.stderr
    assert (tmp_path / "STOPPED").read_text() == "1\n" and weights(tmp_path)["update"] == 1


def test_evaluate_compares_the_policy_with_every_heuristic(tmp_path):
    train_small(tmp_path, 1)
    evaluate = [sys.executable, "-m", "ddppo_hpc.evaluate", "--windows", "3", "--jobs", "64"]
    out = subprocess.run(
        [*evaluate, "--checkpoint", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    scored = out.stdout.splitlines()[0]
    assert (
        scored.startswith("scored: synthetic:") and "test part: jobs 2400 .. 2999 of 3000" in scored
    )
    rows = [line.split() for line in out.stdout.splitlines()[2:]]
    heuristics = ["fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf"]
    predicted = [f"{h}+predicted" for h in heuristics]
    assert [r[0] for r in rows] == [
        "ddppo",
        *(n for pair in zip(heuristics, predicted) for n in pair),
    ]
    assert all(r[1] == "easy" and r[2] == "3" for r in rows)
    # The checkpoint file names the same run; without a checkpoint only heuristics run.
    by_file = subprocess.run(
        [*evaluate, "--checkpoint", str(tmp_path / "checkpoint.pt")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert by_file.stdout == out.stdout
    swf = tmp_path / "held-out.swf"
    subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.data.synthetic", "--jobs", "500", "--out", str(swf)],
        check=True,
        timeout=300,
    )
    tables = [
        subprocess.run(
            [*evaluate, "--trace", str(swf), *checkpoint], capture_output=True, text=True
        ).stdout.splitlines()
        for checkpoint in (["--checkpoint", str(tmp_path)], [])
    ]
    assert tables[1] == [*tables[0][:2], *tables[0][3:]]  # the same without the ddppo row


def test_srun_without_mpi_support_stops_instead_of_training_copies(tmp_path):
    env = dict(os.environ, SLURM_NTASKS="4", SLURM_STEP_ID="0")
    out = subprocess.run(
        [*TRAIN, "--run-dir", str(tmp_path), *SMALL],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert "srun started 4 tasks but MPI sees a world of 1" in out.stderr


def test_metrics_file_has_a_row_per_update(tmp_path):
    train_small(tmp_path, 3)
    with h5py.File(tmp_path / "metrics.h5", "r") as f:
        assert f["update"][:].tolist() == [1, 2, 3]
        assert f["samples"][:].tolist() == [24 * 4] * 3
        seconds = f["update_seconds"][:]
        assert (seconds > 0).all() and seconds.sum() < 60  # each update's own time
        assert f["rollout_seconds"].shape == (3, 1)


def local_sh(run_dir, *overrides: str, **popen) -> subprocess.Popen:
    """jobs/local.sh at 2 ranks into run_dir, its output piped."""
    env = dict(ENV, CONFIG="configs/demo.yaml", RUN_DIR=str(run_dir))
    return subprocess.Popen(
        ["bash", ROOT / "jobs/local.sh", "2", *overrides],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_local_launcher_passes_sigterm_on_and_reports_a_clean_stop(tmp_path):
    # mpirun itself, given SIGTERM, kills ranks a second later and exits 1 (jobs/local.sh).
    options = [*SMALL, "ppo.updates=8", "dist.slow_rank=0", "dist.slow_factor=10"]
    run = local_sh(tmp_path / "run", *options)
    for line in run.stderr:
        if line.startswith("update 2/"):
            run.send_signal(signal.SIGTERM)  # to the script alone
            break
    out, rest = run.communicate(timeout=120)
    assert run.returncode == 0, rest
    stopped = int((tmp_path / "run" / "STOPPED").read_text())
    assert 2 <= stopped < 8 and weights(tmp_path / "run")["update"] == stopped
    assert f"training stopped by a signal at update {stopped}, checkpointed" in out


def test_local_launcher_exits_non_zero_when_training_fails(tmp_path):
    run = local_sh(tmp_path / "run", *SMALL, "ppo.lr=0")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 2
    assert "'ppo.lr' must be positive" in err and "training failed (mpirun exit 2)" in err
    assert "training completed" not in out and "stopped" not in out
