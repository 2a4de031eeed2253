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
# run the same command again to resume. SIGTERM or SIGUSR1 sent to this script does the
# same (it passes SIGUSR1 on to mpirun). Ctrl-C stops without a checkpoint. As root, Open
# MPI also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
#
# The exit status is the run's: 0 when it completed or stopped cleanly after a signal
# (RUN_DIR/STOPPED), else mpirun's. Open MPI's mpirun forwards SIGUSR1 to the ranks and
# exits 0; given SIGTERM it forwards it, kills ranks still running a second later (before
# a long update can checkpoint) and exits 1 even when every rank checkpointed and exited 0.
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

# mpirun in the background, so that a signal to this script reaches the ranks (as SIGUSR1)
# while the script waits.
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
"${limit[@]}" mpirun -n "$RANKS" --oversubscribe python -m ddppo_hpc.train --config "$CONFIG" \
    --run-dir "$RUN_DIR" "${resume[@]}" "$@" &
launcher=$!
trap 'kill -USR1 "$launcher" 2>/dev/null' TERM USR1
while :; do
    status=0
    wait "$launcher" || status=$?
    # A trapped signal ends `wait` early (status above 128) while mpirun still runs.
    if [ "$status" -le 128 ] || ! kill -0 "$launcher" 2>/dev/null; then break; fi
done

# A marker written by this run (not left by an earlier one) tells how it ended.
if [ "$RUN_DIR/COMPLETED" -nt "$stamp" ]; then
    echo "training completed: $RUN_DIR"
elif [ "$RUN_DIR/STOPPED" -nt "$stamp" ]; then
    echo "training stopped by a signal at update $(cat "$RUN_DIR/STOPPED"), checkpointed:" \
        "run the same command again to resume"
else
    echo "training failed (mpirun exit $status): see the messages above" >&2
    exit $((status ? status : 1))
fi
