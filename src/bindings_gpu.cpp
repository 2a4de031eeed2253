// The GPU-cluster part of `ddppo_hpc._core`: type conversion only (docs/gpu.md).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "gpu_cluster.hpp"
#include "gpu_env.hpp"

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
                       size_t begin, size_t end, bool wait, bool hold) {
  ddppo::GpuJobs jobs = JobColumns{id, submit, runtime, gpus, cpu, mem, user, users}.view();
  ddppo::GpuOrder o = ddppo::parse_gpu_order(order);
  ddppo::GpuPlacement p = ddppo::parse_gpu_placement(placement);
  std::vector<double> start, finish, comm;
  std::vector<int32_t> chosen;
  ddppo::GpuMetrics m;
  {
    nb::gil_scoped_release release;
    ddppo::GpuCluster cluster(jobs, topology, begin, end, seed, wait || hold);
    cluster.run(o, p, hold);
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

// The batch environment, the columns it reads and the arrays it writes, kept alive with it.
struct PyGpuEnv {
  std::vector<nb::object> keep;
  ddppo::GpuBatchEnv env;
  ddppo::GpuOutputs outputs{};
};

PyGpuEnv* make_gpu_env(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                       Column<int32_t> gpus, Column<double> cpu, Column<double> mem,
                       Column<int32_t> user, int32_t users, const ddppo::Topology& topology,
                       size_t window_jobs, size_t max_queue, bool dual, const std::string& order,
                       double w_jct, double w_makespan, double w_comm, const std::string& baseline,
                       bool wait, bool non_blocking, bool set_aside, bool teacher_holds,
                       const std::vector<uint64_t>& seeds) {
  ddppo::GpuJobs jobs = JobColumns{id, submit, runtime, gpus, cpu, mem, user, users}.view();
  ddppo::GpuEnvConfig config{window_jobs, max_queue,  dual,   ddppo::parse_gpu_order(order),
                             w_jct,       w_makespan, w_comm, std::nullopt};
  config.wait = wait;
  config.non_blocking = non_blocking;
  config.set_aside = set_aside;
  config.teacher_holds = teacher_holds;
  if (baseline != "none") config.baseline = ddppo::parse_gpu_placement(baseline);
  std::vector<nb::object> keep;
  for (nb::handle h : {nb::cast(id), nb::cast(submit), nb::cast(runtime), nb::cast(gpus),
                       nb::cast(cpu), nb::cast(mem), nb::cast(user)})
    keep.push_back(nb::borrow(h));
  return new PyGpuEnv{std::move(keep), ddppo::GpuBatchEnv(jobs, topology, config, seeds), {}};
}

void set_gpu_outputs(PyGpuEnv& e, Out<float, -1, -1, ddppo::kGpuSlotFeatures> slots,
                     Out<float, -1, ddppo::kGpuGlobalFeatures> global, Out<uint8_t, -1, -1> mask,
                     Out<float, -1> reward, Out<uint8_t, -1> done, Out<int64_t, -1> episode_start,
                     Out<double, -1, ddppo::kGpuEpisodeMetrics> episode_metrics) {
  size_t b = e.env.size();
  if (slots.shape(0) != b || global.shape(0) != b || mask.shape(0) != b || reward.shape(0) != b ||
      done.shape(0) != b || episode_start.shape(0) != b || episode_metrics.shape(0) != b ||
      slots.shape(1) != e.env.slots() || mask.shape(1) != e.env.slots())
    throw std::invalid_argument("output arrays do not match the batch");
  e.outputs = {slots.data(), global.data(),        mask.data(),           reward.data(),
               done.data(),  episode_start.data(), episode_metrics.data()};
  for (nb::handle h : {nb::cast(slots), nb::cast(global), nb::cast(mask), nb::cast(reward),
                       nb::cast(done), nb::cast(episode_start), nb::cast(episode_metrics)})
    e.keep.push_back(nb::borrow(h));
}

ddppo::GpuOutputs gpu_outputs(const PyGpuEnv& e) {
  if (!e.outputs.slots) throw std::invalid_argument("set_outputs() first");
  return e.outputs;
}

void check_batch(const PyGpuEnv& e, const Out<int32_t, -1>& actions) {
  if (actions.shape(0) != e.env.size()) throw std::invalid_argument("one action per environment");
}

void bind_gpu_env(nb::module_& m) {
  m.attr("GPU_SLOT_FEATURES") = ddppo::kGpuSlotFeatures;
  m.attr("GPU_GLOBAL_FEATURES") = ddppo::kGpuGlobalFeatures;
  nb::class_<PyGpuEnv>(m, "GpuBatchEnv")
      .def(nb::new_(&make_gpu_env), "id"_a, "submit"_a, "runtime"_a, "gpus"_a, "cpu"_a, "mem"_a,
           "user"_a, "users"_a, "topology"_a, "window_jobs"_a, "max_queue"_a, "dual"_a, "order"_a,
           "w_jct"_a, "w_makespan"_a, "w_comm"_a, "baseline"_a, "wait"_a, "non_blocking"_a,
           "set_aside"_a, "teacher_holds"_a, "seeds"_a)
      .def("__len__", [](const PyGpuEnv& e) { return e.env.size(); })
      .def_prop_ro("slots", [](const PyGpuEnv& e) { return e.env.slots(); })
      .def("set_outputs", &set_gpu_outputs, "slots"_a, "global_"_a, "mask"_a, "reward"_a, "done"_a,
           "episode_start"_a, "episode_metrics"_a)
      .def("reset",
           [](PyGpuEnv& e) {
             ddppo::GpuOutputs out = gpu_outputs(e);
             nb::gil_scoped_release release;
             e.env.reset(out);
           })
      .def("step",
           [](PyGpuEnv& e, Out<int32_t, -1> actions) {
             check_batch(e, actions);
             ddppo::GpuOutputs out = gpu_outputs(e);
             nb::gil_scoped_release release;
             e.env.step(actions.data(), out);
           })
      .def("observe", [](PyGpuEnv& e) { e.env.observe(gpu_outputs(e)); })
      .def("heuristic_actions",
           [](PyGpuEnv& e, const std::string& order, const std::string& placement,
              Out<int32_t, -1> actions) {
             check_batch(e, actions);
             e.env.heuristic_actions(ddppo::parse_gpu_order(order),
                                     ddppo::parse_gpu_placement(placement), actions.data());
           })
      .def("begin_at", [](PyGpuEnv& e, size_t i, size_t start) { e.env.begin_at(i, start); })
      .def("episodes", [](const PyGpuEnv& e, size_t i) { return e.env.episodes(i); })
      .def(
          "decision",
          [](const PyGpuEnv& e, size_t i) {
            const ddppo::GpuCluster& s = e.env.cluster(i);
            return nb::make_tuple(s.now(), s.waiting().size(), s.head());
          },
          "i"_a, "Environment i's clock, waiting jobs and committed job (-1: none).")
      .def("restore",
           [](PyGpuEnv& e, size_t i, uint64_t episode, const std::vector<int32_t>& actions) {
             e.env.restore(i, episode, actions);
           });
}

}  // namespace

void bind_gpu(nb::module_& m) {
  bind_gpu_env(m);
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
        "wait"_a, "hold"_a,
        "Simulates GPU jobs [begin, end) with heuristics (with `wait`, the wait rule orders; "
        "with `hold`, the hold rule: the wait rule that also sets aside); "
        "returns (start, end, comm cost, "
        "GPUs of every job in job order, metrics).");
}

}  // namespace ddppo_bindings
