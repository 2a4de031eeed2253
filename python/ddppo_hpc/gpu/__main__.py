from ddppo_hpc.args import run
from ddppo_hpc.gpu.cli import main

run(main)
