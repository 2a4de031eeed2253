#!/bin/bash
# DD-PPO training on this machine with mpirun, resumable like the cluster templates.
#
#   jobs/local.sh [RANKS] [KEY=VALUE ...]
#   jobs/local.sh 2                                       # 2 ranks, demo config
#   CONFIG=configs/lublin256.yaml TIME=30m jobs/local.sh 2 ppo.lr=1e-4
#
# RANKS: MPI ranks (default 2). Variables: CONFIG (default configs/demo.yaml), RUN_DIR
# (default runs/<config name>), TIME (optional limit, as for `timeout`: 90s, 30m, 2h). At
# the limit every rank gets SIGUSR1, saves a checkpoint at the end of its update and exits;
# run the same command again to resume. Ctrl-C stops without a checkpoint. As root, Open MPI
# also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -eo pipefail
cd "$(dirname "$0")/.."

# >>> The one line to edit: make `python` the one with ddppo-hpc installed.
source .venv/bin/activate

RANKS=${1:-2}
shift || true
CONFIG=${CONFIG:-configs/demo.yaml}
RUN_DIR=${RUN_DIR:-runs/$(basename "$CONFIG" .yaml)}

resume=()
if [ -f "$RUN_DIR/checkpoint.pt" ]; then
    resume=(--resume)  # the checkpoint's configuration, with the overrides on top
    echo "resuming from $RUN_DIR/checkpoint.pt"
fi
limit=()
if [ -n "${TIME:-}" ]; then
    # At the limit mpirun gets SIGUSR1 and forwards it to the ranks; exit 0 after a clean stop.
    limit=(timeout --preserve-status --signal=USR1 --kill-after=120 "$TIME")
fi

"${limit[@]}" mpirun -n "$RANKS" --oversubscribe python -m ddppo_hpc.train --config "$CONFIG" \
    --run-dir "$RUN_DIR" "${resume[@]}" "$@"
if [ -f "$RUN_DIR/COMPLETED" ]; then
    echo "training completed: $RUN_DIR"
else
    echo "training stopped before its last update: run the same command again to resume"
fi
