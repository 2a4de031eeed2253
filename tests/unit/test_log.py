"""The package logger (python/ddppo_hpc/log.py): progress from rank 0 only, warnings and
errors from every rank, the message alone on the standard error of the moment."""

import pytest

from ddppo_hpc.log import logger, quiet


@pytest.mark.parametrize(("rank", "shown"), [(0, "progress\nbad\n"), (1, "bad\n")])
def test_only_rank_0_logs_progress(capsys, rank, shown):
    quiet(rank)
    try:
        logger.info("progress")
        logger.error("bad")
    finally:
        quiet(0)
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", shown)
