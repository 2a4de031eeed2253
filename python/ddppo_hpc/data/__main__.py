"""`python -m ddppo_hpc.data`: convert, generate, inspect, validate."""

from ddppo_hpc.data.cli import main

raise SystemExit(main())
