"""Slurm 22.05 as advise reads and changes it: squeue/sinfo --json (live, or a saved
snapshot) into a Queue, and scontrol for priorities. Every field is checked: a snapshot
advise cannot read is one SnapshotError naming the file (or command) and the field."""

from __future__ import annotations

import json
import math
import subprocess
import time

from ddppo_hpc.advise.queue import Pending, Queue, Running
from ddppo_hpc.io import reason

NO_LIMIT = (0xFFFFFFFE, 0xFFFFFFFF)  # INFINITE and NO_VAL (uint32), as older Slurms print


class SnapshotError(ValueError):
    """A queue snapshot advise cannot read: the message names the file (or command) and
    the field."""


KINDS = {
    int: "an integer >= 0",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def field(record: object, key: str, where: str, kind: type = int):
    """record[key], checked to be of `kind` (int: >= 0; float: any finite number);
    SnapshotError naming `where`.key otherwise."""
    if not isinstance(record, dict):
        raise SnapshotError(f"{where}: not an object")
    if key not in record:
        raise SnapshotError(f"{where}.{key}: missing")
    value = record[key]
    accepted = (int, float) if kind is float else kind
    fits = isinstance(value, accepted) and not isinstance(value, bool)
    if fits and kind is int:
        fits = value >= 0
    if fits and kind is float:
        fits = math.isfinite(value)
    if not fits:
        raise SnapshotError(f"{where}.{key}: {json.dumps(value)[:40]} is not {KINDS[kind]}")
    return value


def time_limit(job: dict, where: str) -> float | None:
    """A job's time limit in seconds; None without one (22.05 prints null for INFINITE)."""
    if job.get("time_limit", 0) is None:
        return None
    minutes = field(job, "time_limit", where)
    return None if minutes in NO_LIMIT else minutes * 60.0


def left_alone(job: dict, where: str, machine_procs: int) -> str | None:
    """Why the policy cannot use a pending job, or None when it can."""
    if time_limit(job, where) is None:
        return "no time limit"
    if field(job, "het_job_id", where):
        return "heterogeneous job"
    if field(job, "array_job_id", where) and field(job, "array_task_string", where, str):
        return "array not yet split"
    if field(job, "priority", where) == 0:
        return "held"
    if field(job, "cpus", where) > machine_procs:
        return "larger than the machine"
    return None


def cpus_of(sinfo: object, source: str) -> tuple[int, int]:
    """(CPUs, idle CPUs) of the nodes that are up and not draining."""
    nodes = field(sinfo, "nodes", f"{source}: sinfo", list)
    machine = idle = 0
    for i, node in enumerate(nodes):
        where = f"{source}: sinfo.nodes[{i}]"
        down = field(node, "state", where, str) == "down"
        if not down and "DRAIN" not in field(node, "state_flags", where, list):
            machine += field(node, "cpus", where)
            idle += field(node, "idle_cpus", where)
    if machine == 0:
        raise SnapshotError(f"{source}: sinfo.nodes: no node up ({len(nodes)} listed)")
    return machine, idle


def pending_job(job: dict, where: str) -> Pending:
    if field(job, "cpus", where) == 0:
        raise SnapshotError(f"{where}.cpus: 0 (a job needs a CPU)")
    return Pending(
        field(job, "job_id", where),
        float(field(job, "submit_time", where)),
        time_limit(job, where),
        field(job, "cpus", where),
        field(job, "user_id", where),
        field(job, "priority", where),
        field(job, "user_name", where, str),
    )


def running_job(job: dict, where: str) -> Running:
    limit = time_limit(job, where)
    end = math.inf if limit is None else field(job, "start_time", where) + limit
    cpus, user = field(job, "cpus", where), field(job, "user_id", where)
    return Running(field(job, "job_id", where), cpus, user, end)


def queue_of(squeue: object, sinfo: object, now: float, source: str) -> Queue:
    """The Queue of `squeue --json` and `sinfo --json` (Slurm 22.05) at epoch second `now`;
    SnapshotError naming `source` and the field. Only pending and running jobs count
    (squeue lists finished ones for a while); a submit after `now` (clocks apart) moves
    `now` to it."""
    machine, idle = cpus_of(sinfo, source)
    pending, running, alone = [], [], []
    for i, job in enumerate(field(squeue, "jobs", f"{source}: squeue", list)):
        where = f"{source}: squeue.jobs[{i}]"
        state = field(job, "job_state", where, str)
        if state == "RUNNING":
            running.append(running_job(job, where))
        elif state == "PENDING":
            why = left_alone(job, where, machine)
            if why:
                alone.append((field(job, "job_id", where), why))
            else:
                pending.append(pending_job(job, where))
    pending.sort(key=lambda j: (j.submit, j.job_id))
    now = max([float(now), *(j.submit for j in pending)])
    return Queue(now, machine, idle, pending, running, sorted(alone))


def read_snapshot(path: str) -> Queue:
    """The Queue of a snapshot file ({"now", "squeue", "sinfo"})."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SnapshotError(f"{path}: cannot read: {reason(e)}") from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not UTF-8 text (a snapshot is JSON)") from None
    if not text.strip():
        raise SnapshotError(f'{path}: empty (a snapshot is {{"now", "squeue", "sinfo"}})')
    try:
        snapshot = json.loads(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{path}: not JSON: {e}") from None
    now = field(snapshot, "now", f"{path}: snapshot", float)
    squeue, sinfo = (field(snapshot, key, f"{path}: snapshot", dict) for key in ("squeue", "sinfo"))
    return queue_of(squeue, sinfo, now, path)


def slurm_json(command: str) -> dict:
    """The JSON a Slurm command prints with --json; SnapshotError naming it otherwise."""
    name = f"{command} --json"
    try:
        done = subprocess.run([command, "--json"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SnapshotError(f"{command}: not found (is Slurm's client installed?)") from None
    except subprocess.TimeoutExpired:
        raise SnapshotError(f"{name}: no answer in 60 s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise SnapshotError(f"{name}: {lines[-1]}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{name}: not JSON: {e}") from None


def live_queue() -> Queue:
    now = time.time()
    return queue_of(slurm_json("squeue"), slurm_json("sinfo"), now, "squeue/sinfo --json")


def set_priority(job_id: int, priority: int) -> str | None:
    """`scontrol update JobId=N Priority=P` (as the operator); None when it took, else
    scontrol's reason."""
    command = ["scontrol", "update", f"JobId={job_id}", f"Priority={priority}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "scontrol: not found"
    except subprocess.TimeoutExpired:
        return "scontrol: no answer in 60 s"
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
