"""`python -m ddppo_hpc.sim`: simulate heuristic schedulers on an SWF trace."""

from ddppo_hpc.args import run
from ddppo_hpc.sim.cli import main

run(main)
