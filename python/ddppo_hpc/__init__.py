"""ddppo-hpc: MPI-native DD-PPO training of RL batch schedulers for HPC and GPU clusters."""

__version__ = "0.1.0"
