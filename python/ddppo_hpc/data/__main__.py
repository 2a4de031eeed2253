"""`python -m ddppo_hpc.data`: convert, generate, inspect, validate."""

from ddppo_hpc.args import run
from ddppo_hpc.data.cli import main

run(main)
