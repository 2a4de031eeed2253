"""The distribution layer over plain PPO: MPI/Horovod setup, broadcast, gradient
all-reduce, straggler preemption, stop signals and checkpoints. Every helper works at
size 1, with or without mpirun."""
