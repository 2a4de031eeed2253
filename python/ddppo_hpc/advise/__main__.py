"""`python -m ddppo_hpc.advise`: a trained policy orders a live Slurm queue."""

from ddppo_hpc.advise.cli import main
from ddppo_hpc.args import run

run(main)
