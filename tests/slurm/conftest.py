"""A real single-node Slurm (tools/slurm-fixture.sh) for the tests in this directory: no
stand-ins. Started once per session (installing the Debian packages first when root and
missing), torn down at the end, when the teardown fails if a daemon or a job process
survives. Where Slurm cannot be started and the user is not root, these tests are skipped
with the reason; as root (CI) a failed start is an error."""

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tools" / "slurm-fixture.sh"
NODE, PARTITION = "slurm", "debug"  # as tools/slurm-fixture.sh names them
PID_FILES = ("munge/munged.pid", "slurmctld.pid", "slurmd.pid")


@dataclass
class Slurm:
    """The running Slurm: `env` for any subprocess that calls sbatch, squeue or scontrol
    (this environment with SLURM_CONF pointing at the fixture's slurm.conf)."""

    dir: Path
    cpus: int = 0
    node: str = NODE
    partition: str = PARTITION
    env: dict = field(init=False)

    def __post_init__(self):
        self.env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"))

    def run(self, *args: str, check: bool = True, timeout: float = 30):
        """Runs a Slurm command, e.g. `slurm.run("squeue", "--json")`."""
        return subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, check=check, timeout=timeout
        )

    def active_jobs(self) -> list[str]:
        """Ids of the jobs not finished (pending, running, completing), every user's."""
        return self.run("squeue", "-h", "-o", "%A").stdout.split()

    def drain(self, timeout: float = 60):
        """Cancels every job and waits until the queue is empty."""
        if jobs := self.active_jobs():
            self.run("scancel", *jobs, check=False)
        deadline = time.monotonic() + timeout
        while jobs := self.active_jobs():
            assert time.monotonic() < deadline, f"jobs {jobs} still in the queue after scancel"
            time.sleep(0.2)

    def survivors(self) -> list[str]:
        """Processes of this Slurm still running: its daemons and anything started under
        them (they all carry its SLURM_CONF in their environment)."""
        pids = {int(p) for name in PID_FILES if (p := self._pid(name)) is not None}
        mark = f"SLURM_CONF={self.env['SLURM_CONF']}".encode()
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                    pids.add(int(proc.name))
            except OSError:  # gone meanwhile, or not ours to read
                continue
        return [f"{pid}: {command(pid)}" for pid in sorted(pids) if alive(pid)]

    def _pid(self, name: str) -> str | None:
        try:
            return (self.dir / name).read_text().strip() or None
        except OSError:  # not written (a daemon that never started)
            return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


@pytest.fixture(scope="session")
def slurm():
    # Not under pytest's tmp dir: munged (as the munge user) must reach its socket's directory.
    where = Path(tempfile.mkdtemp(prefix="ddppo-slurm-"))
    started = subprocess.run(
        ["bash", FIXTURE, "start", where], capture_output=True, text=True, timeout=900
    )
    if started.returncode != 0:
        subprocess.run(["bash", FIXTURE, "stop", where], capture_output=True, timeout=120)
        shutil.rmtree(where, ignore_errors=True)
        reason = f"cannot start a Slurm here: {started.stderr.strip()}"
        if started.returncode == 3 or os.getuid() != 0:
            pytest.skip(reason)
        pytest.fail(reason)
    cluster = Slurm(where)
    cluster.cpus = int(cluster.run("sinfo", "-h", "-n", NODE, "-o", "%c").stdout)
    yield cluster
    stopped = subprocess.run(
        ["bash", FIXTURE, "stop", where], capture_output=True, text=True, timeout=120
    )
    left = cluster.survivors()
    if not left:
        shutil.rmtree(where, ignore_errors=True)
    assert stopped.returncode == 0, stopped.stderr
    assert not left, f"still running after the Slurm fixture stopped (logs in {where}): {left}"
