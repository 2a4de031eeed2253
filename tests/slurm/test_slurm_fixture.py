"""The Slurm fixture itself: a job step runs on every CPU of the node, and drain() leaves
an empty queue whatever the jobs' states. (Its teardown checks that nothing survives.)"""


def test_a_step_runs_one_task_per_cpu_of_the_node(slurm):
    out = slurm.run("srun", f"--ntasks={slurm.cpus}", "--partition", slurm.partition, "hostname")
    assert len(out.stdout.split()) == slurm.cpus


def test_drain_cancels_running_and_pending_jobs(slurm):
    whole_node = ["sbatch", "--parsable", f"--ntasks={slurm.cpus}", "--output=/dev/null"]
    jobs = [slurm.run(*whole_node, "--wrap", "sleep 300").stdout.strip() for _ in range(2)]
    states = slurm.run("squeue", "-h", "-o", "%T", "-j", ",".join(jobs)).stdout.split()
    assert sorted(states) == ["PENDING", "RUNNING"] or states == ["PENDING", "PENDING"]
    slurm.drain()
    assert slurm.active_jobs() == []
