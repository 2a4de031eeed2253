"""The distribution layer over plain PPO: MPI/Horovod setup, broadcast, gradient
all-reduce, straggler preemption, stop signals and checkpoints. Every helper works at
size 1, with or without mpirun."""

import os

# Open MPI busy-polls while a rank waits in MPI, and Horovod's background thread runs a
# coordination collective every cycle: with one core per rank, waiting ranks then take
# time from their own compute (weak scaling 1 -> 2 ranks fell to 0.7). Yielding when idle
# gives it back. Set before MPI starts (mpi4py's import); the user's own setting wins.
os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
