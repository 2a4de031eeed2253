// The GPU-cluster part of `ddppo_hpc._core`: type conversion only (docs/gpu.md).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "gpu_cluster.hpp"

namespace ddppo_bindings {

using namespace nb::literals;

namespace {

struct JobColumns {
  Column<int64_t> id;
  Column<double> submit, runtime;
  Column<int32_t> gpus;
  Column<double> cpu, mem;
  Column<int32_t> user;
  int32_t users;

  ddppo::GpuJobs view() const {
    size_t n = id.shape(0);
    for (size_t len : {submit.shape(0), runtime.shape(0), gpus.shape(0), cpu.shape(0), mem.shape(0),
                       user.shape(0)})
      if (len != n) throw std::invalid_argument("job columns differ in length");
    return {id.data(),   submit.data(), runtime.data(),
            gpus.data(), cpu.data(),    mem.data(),
            user.data(), users,         n};
  }
};

nb::tuple simulate_gpu(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                       Column<int32_t> gpus, Column<double> cpu, Column<double> mem,
                       Column<int32_t> user, int32_t users, const ddppo::Topology& topology,
                       const std::string& order, const std::string& placement, uint64_t seed,
                       size_t begin, size_t end) {
  ddppo::GpuJobs jobs = JobColumns{id, submit, runtime, gpus, cpu, mem, user, users}.view();
  ddppo::GpuOrder o = ddppo::parse_gpu_order(order);
  ddppo::GpuPlacement p = ddppo::parse_gpu_placement(placement);
  std::vector<double> start, finish, comm;
  std::vector<int32_t> chosen;
  ddppo::GpuMetrics m;
  {
    nb::gil_scoped_release release;
    ddppo::GpuCluster cluster(jobs, topology, begin, end, seed);
    cluster.run(o, p);
    m = ddppo::compute_gpu_metrics(cluster);
    start = cluster.start_times();
    finish = cluster.end_times();
    comm = cluster.comm_costs();
    for (const auto& gpus_of_job : cluster.placements())
      chosen.insert(chosen.end(), gpus_of_job.begin(), gpus_of_job.end());
  }
  nb::dict metrics;
  metrics["jobs"] = m.jobs;
  metrics["multi_gpu_jobs"] = m.multi_gpu_jobs;
  metrics["avg_jct"] = m.avg_jct;
  metrics["avg_queue_delay"] = m.avg_queue_delay;
  metrics["makespan"] = m.makespan;
  metrics["avg_comm_cost"] = m.avg_comm_cost;
  metrics["gpu_utilization"] = m.gpu_utilization;
  return nb::make_tuple(to_numpy(std::move(start)), to_numpy(std::move(finish)),
                        to_numpy(std::move(comm)), to_numpy(std::move(chosen)), metrics);
}

}  // namespace

void bind_gpu(nb::module_& m) {
  nb::class_<ddppo::Topology>(m, "Topology")
      .def(nb::init<>())
      .def_rw("rack", &ddppo::Topology::rack)
      .def_rw("gpus", &ddppo::Topology::gpus)
      .def_rw("cpu", &ddppo::Topology::cpu)
      .def_rw("mem", &ddppo::Topology::mem)
      .def_rw("nominal", &ddppo::Topology::nominal)
      .def_rw("speed", &ddppo::Topology::speed)
      .def_rw("link_machine", &ddppo::Topology::link_machine)
      .def_rw("link_rack", &ddppo::Topology::link_rack)
      .def_rw("link_cross", &ddppo::Topology::link_cross)
      .def_rw("comm_penalty", &ddppo::Topology::comm_penalty)
      .def("validate", &ddppo::Topology::validate, "Checks the machines; raises ValueError.");
  m.def("simulate_gpu", &simulate_gpu, "id"_a, "submit"_a, "runtime"_a, "gpus"_a, "cpu"_a, "mem"_a,
        "user"_a, "users"_a, "topology"_a, "order"_a, "placement"_a, "seed"_a, "begin"_a, "end"_a,
        "Simulates GPU jobs [begin, end) with heuristics; returns (start, end, comm cost, "
        "GPUs of every job in job order, metrics).");
}

}  // namespace ddppo_bindings
