"""The batch templates in jobs/: valid bash, and under stand-ins for the cluster commands
(`srun` and `mpiexec` that run `mpirun -n 2`, an `scontrol` that records its arguments) a
2-rank demo training that stops on SIGUSR1, is requeued (Slurm) and resumes to the end."""

import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from simhelpers import TINY_TRAINING

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ["jobs/slurm/train.sbatch", "jobs/pbs/train.pbs", "jobs/local.sh"]
# Rank 0 runs 10x slower so that the signal lands mid-run; sleeping changes no result.
OVERRIDES = [*TINY_TRAINING, "dist.preemption=false", "dist.slow_rank=0", "dist.slow_factor=10"]
# Launchers drop their own options, note their pid (the signal's target: the real srun and
# mpiexec deliver signals to the ranks, as mpirun does) and start 2 ranks.
LAUNCHER = """#!/bin/bash
while [[ $1 == -* ]]; do case $1 in -n|-np) shift 2;; *) shift;; esac; done
echo $$ > "{fake}/launcher.pid"
exec mpirun -n 2 --oversubscribe "$@"
"""
SCONTROL = '#!/bin/bash\necho "$@" >> "{fake}/scontrol.log"\n'


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_are_valid_bash(template):
    assert subprocess.run(["bash", "-n", ROOT / template]).returncode == 0


def cluster(tmp_path: Path, **variables) -> dict:
    """An environment with the stand-ins first on the PATH and the demo config's overrides."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("srun", LAUNCHER), ("mpiexec", LAUNCHER), ("scontrol", SCONTROL)):
        (fake / name).write_text(text.format(fake=fake))
        (fake / name).chmod(0o755)
    return dict(
        os.environ,
        PATH=f"{fake}{os.pathsep}{os.environ['PATH']}",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        CONFIG="configs/demo.yaml",
        RUN_DIR=str(tmp_path / "run"),
        **variables,
    )


def interrupted_then_resumed(template: str, env: dict, fake: Path) -> tuple[str, str]:
    """Runs the template, sends SIGUSR1 to its launcher at update 2, then runs it again;
    returns both runs' standard output."""
    first = subprocess.Popen(
        ["bash", ROOT / template],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in first.stderr:
        if line.startswith("update 2/"):
            os.kill(int((fake / "launcher.pid").read_text()), signal.SIGUSR1)
            break
    rest = first.stderr.read()
    assert first.wait(timeout=120) == 0, rest
    assert "stopped by signal" in rest
    run_dir = Path(env["RUN_DIR"])
    assert 2 <= checkpoint(run_dir)["update"] < 6 and not (run_dir / "COMPLETED").exists()
    second = subprocess.run(
        ["bash", ROOT / template], env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stdout and "training completed" in second.stdout
    assert checkpoint(run_dir)["update"] == 6 and (run_dir / "COMPLETED").read_text() == "6\n"
    assert len(checkpoint(run_dir)["ranks"]) == 2
    return first.stdout.read(), second.stdout


def checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoint.pt", weights_only=False)


def test_slurm_template_requeues_after_usr1_and_resumes(tmp_path):
    overrides = " ".join([*OVERRIDES, "ppo.updates=6"])
    env = cluster(tmp_path, SLURM_SUBMIT_DIR=str(ROOT), SLURM_JOB_ID="4242", OVERRIDES=overrides)
    first, second = interrupted_then_resumed("jobs/slurm/train.sbatch", env, tmp_path / "bin")
    assert "requeueing job 4242" in first and "requeueing" not in second
    assert (tmp_path / "bin" / "scontrol.log").read_text() == "requeue 4242\n"  # once


def test_a_requeued_slurm_job_without_a_checkpoint_starts_over(tmp_path):
    overrides = " ".join([*OVERRIDES, "ppo.updates=2"])
    env = cluster(tmp_path, SLURM_SUBMIT_DIR=str(ROOT), SLURM_JOB_ID="7", OVERRIDES=overrides)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.h5").write_text("left by a start that died before its checkpoint")
    first = subprocess.run(["bash", ROOT / "jobs/slurm/train.sbatch"], env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert first.returncode != 0 and "holds a run (metrics.h5)" in first.stderr  # a new job
    restarted = subprocess.run(["bash", ROOT / "jobs/slurm/train.sbatch"],
                               env={**env, "SLURM_RESTART_COUNT": "1"},
                               capture_output=True, text=True, timeout=300)  # fmt: skip
    assert restarted.returncode == 0, restarted.stderr
    assert "starting over" in restarted.stdout and checkpoint(run_dir)["update"] == 2


def test_pbs_template_resumes_after_usr1(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("node1\nnode1\n")
    env = cluster(
        tmp_path,
        PBS_O_WORKDIR=str(ROOT),
        PBS_NODEFILE=str(nodefile),
        OVERRIDES=" ".join([*OVERRIDES, "ppo.updates=6"]),
    )
    first, _ = interrupted_then_resumed("jobs/pbs/train.pbs", env, tmp_path / "bin")
    assert "submit the same qsub command again" in first


def test_local_launcher_trains_to_completion(tmp_path):
    env = cluster(tmp_path)
    out = subprocess.run(
        ["bash", ROOT / "jobs/local.sh", "2", *TINY_TRAINING, "ppo.updates=2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "training completed" in out.stdout
    assert (tmp_path / "run" / "COMPLETED").read_text() == "2\n"
    assert len(checkpoint(tmp_path / "run")["ranks"]) == 2
