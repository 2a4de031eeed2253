"""`python -m ddppo_hpc.advise`: a trained policy orders a live Slurm queue (cli.py;
docs/advise.md)."""
