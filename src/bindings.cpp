// The Python module `ddppo_hpc._core`: type conversion only; the logic lives in the other
// files of src/.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "metrics.hpp"
#include "policy.hpp"
#include "simulator.hpp"
#include "swf.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

template <typename T>
using Column = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Hands a vector to NumPy without a copy.
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
}

ddppo::Workload workload(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                         Column<double> requested_time, Column<int32_t> procs,
                         Column<int64_t> user) {
  size_t n = id.shape(0);
  if (submit.shape(0) != n || runtime.shape(0) != n || requested_time.shape(0) != n ||
      procs.shape(0) != n || user.shape(0) != n)
    throw std::invalid_argument("job columns differ in length");
  return {
      id.data(), submit.data(), runtime.data(), requested_time.data(), procs.data(), user.data(),
      n};
}

nb::tuple parse_swf(nb::bytes text, bool skip_bad) {
  ddppo::SwfColumns c;
  {
    nb::gil_scoped_release release;
    c = ddppo::parse_swf({text.c_str(), text.size()}, skip_bad);
  }
  nb::list fields;
  for (auto& f : c.fields) fields.append(to_numpy(std::move(f)));
  return nb::make_tuple(fields, c.header, c.skipped);
}

nb::tuple simulate(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                   Column<double> requested_time, Column<int32_t> procs, Column<int64_t> user,
                   int32_t machine_procs, const std::string& policy, const std::string& backfill,
                   size_t begin, size_t end) {
  ddppo::Workload w = workload(id, submit, runtime, requested_time, procs, user);
  ddppo::Policy p = ddppo::parse_policy(policy);
  ddppo::Backfill b = ddppo::parse_backfill(backfill);
  std::vector<double> start;
  ddppo::Metrics m;
  {
    nb::gil_scoped_release release;
    ddppo::Simulator sim(w, begin, end, machine_procs, p, b);
    start = sim.run();
    m = ddppo::compute_metrics(w, begin, start, machine_procs);
  }
  nb::dict metrics;
  metrics["jobs"] = m.jobs;
  metrics["avg_wait"] = m.avg_wait;
  metrics["max_wait"] = m.max_wait;
  metrics["avg_bsld"] = m.avg_bsld;
  metrics["max_bsld"] = m.max_bsld;
  metrics["utilization"] = m.utilization;
  metrics["makespan"] = m.makespan;
  metrics["jain_user_bsld"] = m.jain_user_bsld;
  metrics["users"] = to_numpy(std::move(m.users));
  metrics["user_avg_wait"] = to_numpy(std::move(m.user_avg_wait));
  metrics["user_avg_bsld"] = to_numpy(std::move(m.user_avg_bsld));
  return nb::make_tuple(to_numpy(std::move(start)), metrics);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "ddppo-hpc C++ core: SWF parsing and the cluster simulator";
  m.def("parse_swf", &parse_swf, "text"_a, "skip_bad"_a = false,
        "Parses SWF text: (18 field arrays in file order, header lines, lines skipped).");
  m.def("simulate", &simulate, "id"_a, "submit"_a, "runtime"_a, "requested_time"_a, "procs"_a,
        "user"_a, "machine_procs"_a, "policy"_a, "backfill"_a, "begin"_a, "end"_a,
        "Simulates jobs [begin, end) with a heuristic; returns (start times, metrics).");
}
