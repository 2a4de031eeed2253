"""Real Horovod over MPI: run at size 1 by `pytest tests`, at size 2 by
`mpirun -n 2 python -m pytest tests/mpi` (see the Makefile)."""

import horovod.torch as hvd
import pytest
import torch
from mpi4py import MPI


@pytest.fixture(scope="module", autouse=True)
def horovod():
    # Horovod on the communicator mpi4py already initialised, as the trainer does; it stays
    # up for the training tests that follow in this process.
    hvd.init(comm=MPI.COMM_WORLD)


def test_horovod_uses_the_mpi4py_world():
    assert hvd.mpi_enabled()
    assert hvd.size() == MPI.COMM_WORLD.Get_size()
    assert hvd.rank() == MPI.COMM_WORLD.Get_rank()


def test_ring_allreduce_sums_and_averages_rank_values():
    x = torch.full((5,), float(hvd.rank() + 1))
    n = hvd.size()
    total = hvd.allreduce(x, op=hvd.Sum, name="sum")
    mean = hvd.allreduce(x, op=hvd.Average, name="mean")
    assert torch.equal(total, torch.full((5,), n * (n + 1) / 2))
    assert torch.equal(mean, torch.full((5,), (n + 1) / 2))


def test_broadcast_from_rank0_gives_equal_weights():
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(8, 3)
    torch.manual_seed(0)
    rank0_weights = torch.nn.Linear(8, 3).state_dict()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for name, value in model.state_dict().items():
        assert torch.equal(value, rank0_weights[name])
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
    gathered = hvd.allgather(flat, name="weights")
    assert gathered.shape[0] == hvd.size()
    assert all(torch.equal(gathered[0], row) for row in gathered)
