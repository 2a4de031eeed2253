from ddppo_hpc.gpu.cli import main

raise SystemExit(main())
