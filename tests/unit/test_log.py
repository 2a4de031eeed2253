"""The package logger (python/ddppo_hpc/log.py): progress from rank 0 only, warnings and
errors from every rank, the message alone on standard error."""

import os
import subprocess
import sys

import pytest

LOG_BOTH = "from ddppo_hpc.log import logger; logger.info('progress'); logger.error('bad')"


@pytest.mark.parametrize(("rank", "shown"), [("0", "progress\nbad\n"), ("1", "bad\n")])
def test_only_rank_0_logs_progress(rank, shown):
    env = dict(os.environ, OMPI_COMM_WORLD_RANK=rank)  # as mpirun sets it
    out = subprocess.run(
        [sys.executable, "-c", LOG_BOTH], capture_output=True, text=True, env=env, timeout=60
    )
    assert (out.stdout, out.stderr) == ("", shown)
