"""`python -m ddppo_hpc.sim`: simulate heuristic schedulers on an SWF trace."""

from ddppo_hpc.sim.cli import main

raise SystemExit(main())
