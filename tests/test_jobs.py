"""The batch templates in jobs/: valid bash; the PBS one under a stand-in `mpiexec` (that
runs `mpirun -n 2`) stops its 2-rank demo training on a SIGUSR1 sent to the batch shell (as
`qsig -s USR1` does) and resumes to the end; the local launcher trains to completion. The
Slurm template runs on a real Slurm instead: tests/slurm/test_slurm_template.py."""

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
# The stand-in mpiexec drops its own options and starts 2 ranks with mpirun, which passes
# SIGUSR1 on to them (as Open MPI's mpiexec does).
MPIEXEC = """#!/bin/bash
while [[ $1 == -* ]]; do case $1 in -n|-np) shift 2;; *) shift;; esac; done
exec mpirun -n 2 --oversubscribe "$@"
"""


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_are_valid_bash(template):
    assert subprocess.run(["bash", "-n", ROOT / template]).returncode == 0


def cluster(tmp_path: Path, **variables) -> dict:
    """An environment with the stand-in mpiexec first on the PATH and the demo config."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mpiexec").write_text(MPIEXEC)
    (fake / "mpiexec").chmod(0o755)
    return dict(
        os.environ,
        PATH=f"{fake}{os.pathsep}{os.environ['PATH']}",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        CONFIG="configs/demo.yaml",
        RUN_DIR=str(tmp_path / "run"),
        **variables,
    )


def interrupted_then_resumed(template: str, env: dict) -> tuple[str, str]:
    """Runs the template, sends SIGUSR1 to its shell at update 2, then runs it again;
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
            first.send_signal(signal.SIGUSR1)
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


def test_pbs_template_resumes_after_usr1_to_its_shell(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("node1\nnode1\n")
    env = cluster(
        tmp_path,
        PBS_O_WORKDIR=str(ROOT),
        PBS_NODEFILE=str(nodefile),
        OVERRIDES=" ".join([*OVERRIDES, "ppo.updates=6"]),
    )
    first, _ = interrupted_then_resumed("jobs/pbs/train.pbs", env)
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
