"""`python -m ddppo_hpc.train` on hostile input (issue 14): a run directory that holds a run,
a full disk, unreadable configurations and checkpoints, a changed configuration on resume.
Each ends in one line and exit 2, and leaves the run directory's files as they were."""

import os
import shutil
from pathlib import Path

import h5py
import pytest
import torch
from simhelpers import TINY_TRAINING

from ddppo_hpc.train import main

PREFIX = "python -m ddppo_hpc.train: error: "


def train(capsys, run_dir: Path, *args: str) -> tuple[int, list[str]]:
    """main's exit code and the error lines it printed."""
    code = main(["--run-dir", str(run_dir), *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.startswith(PREFIX)]


def rows(run_dir: Path) -> list[int]:
    with h5py.File(run_dir / "metrics.h5", "r") as f:
        return f["update"][:].astype(int).tolist()


def update_of(run_dir: Path) -> int:
    return torch.load(run_dir / "checkpoint.pt", weights_only=False)["update"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished 1-update run (checkpoint.pt, metrics.h5, COMPLETED); tests copy it."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    assert main(["--run-dir", str(run_dir), *TINY_TRAINING, "ppo.updates=1"]) == 0
    return run_dir


def copy_of(trained: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run"))


def test_a_new_run_refuses_a_directory_that_holds_a_run(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    code, errors = train(capsys, run_dir, *TINY_TRAINING, "ppo.updates=2")
    assert code == 2
    assert errors == [
        f"{PREFIX}{run_dir} holds a run (checkpoint.pt, metrics.h5, COMPLETED); use --resume "
        "to continue it, or --force to start over"
    ]
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_force_starts_over_and_removes_only_the_runs_files(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    (run_dir / "notes.txt").write_text("mine")
    code, errors = train(capsys, run_dir, "--force", *TINY_TRAINING, "ppo.updates=2")
    assert (code, errors) == (0, [])
    assert rows(run_dir) == [1, 2]  # the new run's rows only
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert (run_dir / "COMPLETED").read_text() == "2\n"


def test_resume_logs_the_updates_after_the_checkpoint_once(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    at_update_1 = (run_dir / "checkpoint.pt").read_bytes()
    assert train(capsys, run_dir, "--resume", "ppo.updates=2") == (0, [])
    # As if killed after logging update 2 but before its checkpoint: resume from update 1.
    (run_dir / "checkpoint.pt").write_bytes(at_update_1)
    assert train(capsys, run_dir, "--resume", "ppo.updates=2") == (0, [])
    assert rows(run_dir) == [1, 2]


def test_resume_at_another_world_size_keeps_completed(trained, tmp_path, capsys):
    run_dir = copy_of(trained, tmp_path)
    state = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    torch.save({**state, "ranks": state["ranks"] * 2}, run_dir / "checkpoint.pt")
    code, errors = train(capsys, run_dir, "--resume", "ppo.updates=2")
    assert code == 2 and len(errors) == 1
    assert "was written by 2 ranks, this job has 1" in errors[0]
    assert (run_dir / "COMPLETED").read_text() == "1\n"


def fill(disk: Path, leave: int) -> None:
    """Fills the disk but for `leave` bytes."""
    stat = os.statvfs(disk)
    (disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - leave))


@pytest.mark.parametrize(
    ("leave", "target"),
    [
        (2048, "metrics.h5"),  # not room for the next metrics file (about 6 KB)
        (24576, "checkpoint.pt"),  # room for the metrics, not for a checkpoint (about 52 KB)
    ],
)
def test_a_full_disk_is_one_line_and_keeps_the_last_outputs(
    trained, small_disk, capsys, leave, target
):
    disk = small_disk(512)
    run_dir = Path(shutil.copytree(trained, disk / "run"))
    checkpoint = (run_dir / "checkpoint.pt").read_bytes()
    fill(disk, leave)
    code, errors = train(capsys, run_dir, "--resume", "ppo.updates=2", "run.checkpoint_every=1")
    assert code == 2
    assert errors == [f"{PREFIX}{run_dir / target}: cannot write: no space left on device"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint.pt", "metrics.h5"]
    assert (run_dir / "checkpoint.pt").read_bytes() == checkpoint
    assert rows(run_dir) == ([1] if target == "metrics.h5" else [1, 2])


def garbage(tmp_path: Path) -> dict[str, Path]:
    """Files that are not what they claim to be."""
    files = {"binary": tmp_path / "binary.yaml", "text": tmp_path / "text.pt"}
    files["binary"].write_bytes(bytes(range(128, 256)))
    files["text"].write_text("not a checkpoint")
    return files


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "{tmp}"], "{tmp}: cannot read: is a directory"),
        (["--config", "{tmp}/binary.yaml"], "{tmp}/binary.yaml: not a YAML file (not UTF-8"),
        (["ppo.lr=[1"], "command line: 'ppo.lr': '[1' is not a YAML value"),
        (["ppo.lr=.nan"], "command line: 'ppo.lr' must be a finite number, not nan"),
        (["--run-dir", "{tmp}/text.pt/run"], "{tmp}/text.pt/run: cannot write: not a directory"),
        (["--resume"], "{run}/checkpoint.pt: not a ddppo-hpc training checkpoint (truncated"),
        (["--resume", "policy.hidden=64"], "command line: 'policy.hidden' cannot change on"),
        (["--resume", "env.num_envs=8"], "command line: 'env.num_envs' cannot change on --resume"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(trained, tmp_path, capsys, args, message):
    garbage(tmp_path)
    run_dir = copy_of(trained, tmp_path)
    if args == ["--resume"]:  # a checkpoint cut short, as by a full disk under old code
        data = (run_dir / "checkpoint.pt").read_bytes()
        (run_dir / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    args = [a.format(tmp=tmp_path, run=run_dir) for a in args]
    code = main(["--run-dir", str(run_dir), *args, *([] if "--resume" in args else TINY_TRAINING)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "Errno" not in err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(PREFIX + message.format(tmp=tmp_path, run=run_dir)), err


def test_resume_of_a_foreign_checkpoint(tmp_path, capsys):
    for name, content in (("text", b"not a checkpoint"), ("list", None)):
        run_dir = tmp_path / name
        run_dir.mkdir()
        if content is None:
            torch.save([1, 2], run_dir / "checkpoint.pt")
        else:
            (run_dir / "checkpoint.pt").write_bytes(content)
        code, errors = train(capsys, run_dir, "--resume")
        assert code == 2
        assert errors[0].startswith(f"{PREFIX}{run_dir}/checkpoint.pt: not a ddppo-hpc training")
