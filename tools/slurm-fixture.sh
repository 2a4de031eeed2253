#!/usr/bin/env bash
# A private single-node Slurm on this machine, for the tests in tests/slurm/ and for trying
# the batch templates by hand. Everything (configuration, munge key and socket, state,
# spool, logs, PID files) lives in DIR; nothing in /etc is touched and other Slurm or munge
# daemons on the machine are left alone (own ports, own munge socket).
#
#   tools/slurm-fixture.sh start DIR    install when root and missing, start, wait until idle
#   tools/slurm-fixture.sh stop DIR     cancel every job, wait for an empty queue, stop
#   export SLURM_CONF=DIR/slurm.conf    then sbatch, squeue, scontrol use it
#
# The node (`slurm`) has this machine's CPUs; its partition is `debug`. As root, missing
# Debian packages (slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge, and
# libpmix-dev: Slurm's PMIx plugin loads its libpmix.so) are installed first. Open MPI
# under srun needs `srun --mpi=pmix`; the slurm.conf keeps Slurm's default MpiDefault=none,
# as many sites do, so that a job works only if it asks for PMIx itself (as
# jobs/slurm/train.sbatch does). Exit status: 0 started or stopped, 3 when Slurm cannot be
# set up here (not root and not installed), 1 when a daemon would not start (its log's
# tail is printed).
set -euo pipefail

NODE=slurm
PARTITION=debug
PACKAGES=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libpmix-dev)

say() { printf '[slurm-fixture] %s\n' "$*" >&2; }

install_packages() {
    local missing=()
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
            missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "Slurm is not installed (missing ${missing[*]}) and installing it needs root and apt-get"
        exit 3
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
}

free_port() {  # a TCP port nobody listens on (bash's /dev/tcp connects or fails)
    local port
    while :; do
        port=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
}

write_conf() {  # $1 = DIR, $2 = the user the daemons run as
    local cpus memory
    cpus=$(nproc)
    # Slurm drains a node that reports less memory than configured: stay a little below.
    memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    memory=$((memory * 9 / 10))
    cat > "$1/slurm.conf" <<EOF
ClusterName=ddppo
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$2
SlurmdUser=$2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$1/munge/munge.socket,cred_expire=20
StateSaveLocation=$1/state
SlurmdSpoolDir=$1/spool
SlurmctldPidFile=$1/slurmctld.pid
SlurmdPidFile=$1/slurmd.pid
SlurmctldLogFile=$1/slurmctld.log
SlurmdLogFile=$1/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobRequeue=1
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$NODE NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

daemon() {  # $1 = DIR, $2 = name (its output in DIR/$2.log), $3 = its PID file, then the command
    local dir=$1 name=$2 pid_file=$3
    shift 3
    setsid "$@" >> "$dir/$name.log" 2>&1 < /dev/null &
    for _ in $(seq 100); do
        [ -s "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null && return 0
        kill -0 $! 2>/dev/null || break
        sleep 0.1
    done
    say "$name did not start; the end of $dir/$name.log:"
    tail -n 20 "$dir/$name.log" >&2 || true
    exit 1
}

start() {
    local dir=$1 user munge_user
    install_packages
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
    chmod 755 "$dir"  # munged checks every directory above its socket
    user=$(id -un)
    munge_user=$user
    [ "$(id -u)" = 0 ] && munge_user=munge  # munged refuses to run as root
    mungekey --create --force --keyfile="$dir/munge/munge.key"
    chown -R "$munge_user:" "$dir/munge"
    chmod 755 "$dir/munge"  # the socket must be reachable by every user; the key stays 0600
    write_conf "$dir" "$user"
    local as_munge=()
    [ "$munge_user" != "$user" ] && as_munge=(setpriv --reuid="$munge_user" --regid="$munge_user" --init-groups)
    daemon "$dir" munged "$dir/munge/munged.pid" "${as_munge[@]}" munged --foreground --socket="$dir/munge/munge.socket" \
        --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
        --seed-file="$dir/munge/munged.seed" --log-file="$dir/munge/munged.log"
    export SLURM_CONF=$dir/slurm.conf
    daemon "$dir" slurmctld "$dir/slurmctld.pid" slurmctld -D -i -f "$SLURM_CONF"
    daemon "$dir" slurmd "$dir/slurmd.pid" slurmd -D -f "$SLURM_CONF" -N "$NODE"
    for _ in $(seq 300); do
        case $(sinfo -h -n "$NODE" -o %T 2>/dev/null) in idle) return 0 ;; esac
        sleep 0.1
    done
    say "node $NODE is not idle after 30 s: $(sinfo -h -N -o '%N %T %E' 2>&1)"
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    exit 1
}

stop_pid() {  # $1 = PID file: TERM, then KILL after 10 s
    [ -s "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

stop() {
    local dir=$1
    export SLURM_CONF=$dir/slurm.conf
    # Job processes outlive slurmd: cancel the jobs and let them end before the daemons.
    if [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
        local jobs
        jobs=$(squeue -h -o %A 2>/dev/null || true)
        [ -z "$jobs" ] || scancel $jobs 2>/dev/null || true
        for _ in $(seq 600); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    stop_pid "$dir/slurmd.pid"
    stop_pid "$dir/slurmctld.pid"
    stop_pid "$dir/munge/munged.pid"
}

case ${1:-} in
    start | stop) [ $# -eq 2 ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; } ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
"$1" "$(realpath -m "$2")"
