// The Python module `ddppo_hpc._core`: type conversion only; the logic lives in the other
// files of src/.
#include "bindings.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "env.hpp"
#include "metrics.hpp"
#include "policy.hpp"
#include "simulator.hpp"
#include "swf.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using ddppo_bindings::Column;
using ddppo_bindings::Out;
using ddppo_bindings::to_numpy;

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
  nb::list header;  // as bytes: old logs may write their comments in Latin-1
  for (const auto& line : c.header) header.append(nb::bytes(line.data(), line.size()));
  return nb::make_tuple(fields, header, c.skipped);
}

nb::tuple simulate(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                   Column<double> requested_time, Column<int32_t> procs, Column<int64_t> user,
                   int32_t machine_procs, const std::string& policy, const std::string& backfill,
                   size_t begin, size_t end, const std::string& estimate) {
  ddppo::Workload w = workload(id, submit, runtime, requested_time, procs, user);
  ddppo::Policy p = ddppo::parse_policy(policy);
  ddppo::Backfill b = ddppo::parse_backfill(backfill);
  ddppo::Estimate e = ddppo::parse_estimate(estimate);
  std::vector<double> start;
  ddppo::Metrics m;
  {
    nb::gil_scoped_release release;
    ddppo::Simulator sim(w, begin, end, machine_procs, p, b, e);
    m = ddppo::compute_metrics(w, begin, sim.run(), machine_procs);
    start = std::move(sim).take_start_times();
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

// The batch environment and the arrays it reads: the workload's columns stay alive as long
// as the environment does.
struct PyBatchEnv {
  std::vector<nb::object> columns;
  ddppo::BatchEnv env;
  ddppo::Outputs outputs{};
  std::vector<nb::object> output_arrays;
};

PyBatchEnv* make_env(Column<int64_t> id, Column<double> submit, Column<double> runtime,
                     Column<double> requested_time, Column<int32_t> procs, Column<int64_t> user,
                     Column<int32_t> user_index, int32_t users, int32_t machine_procs,
                     size_t window_jobs, size_t max_queue, const std::string& policy,
                     const std::string& backfill, const std::string& estimate,
                     const std::string& reward, const std::string& baseline, bool dense, bool wait,
                     bool history, bool agent_backfill, bool heuristic_ranks, bool fit_times,
                     const std::string& teacher, size_t teacher_jobs, bool order_actions,
                     const std::vector<std::string>& action_backfills,
                     const std::vector<uint64_t>& seeds) {
  ddppo::Workload w = workload(id, submit, runtime, requested_time, procs, user);
  if (user_index.shape(0) != w.size)
    throw std::invalid_argument("user indices differ in length from the jobs");
  ddppo::Accounts accounts{user_index.data(), users};
  if (teacher != "backfill_order" && teacher != "best" && teacher != "rollout")
    throw std::invalid_argument("unknown teacher '" + teacher +
                                "' (backfill_order, best, rollout)");
  if (teacher_jobs > 0 && teacher != "best")
    throw std::invalid_argument("teacher_jobs chooses the best heuristic: it needs teacher 'best'");
  const bool fixed_baseline = baseline != "none" && baseline != "best";
  std::vector<ddppo::Backfill> backfills;
  for (const std::string& name : action_backfills) backfills.push_back(ddppo::parse_backfill(name));
  ddppo::EnvConfig config{
      machine_procs,
      window_jobs,
      max_queue,
      ddppo::parse_policy(policy),
      ddppo::parse_backfill(backfill),
      ddppo::parse_reward(reward),
      ddppo::parse_estimate(estimate),
      fixed_baseline ? std::optional(ddppo::parse_policy(baseline)) : std::nullopt,
      baseline == "best",
      teacher == "best"      ? ddppo::Teacher::kBest
      : teacher == "rollout" ? ddppo::Teacher::kRollout
                             : ddppo::Teacher::kPolicy,
      teacher_jobs,
      dense,
      wait,
      history,
      agent_backfill,
      heuristic_ranks,
      fit_times,
      order_actions,
      backfills};
  std::vector<nb::object> keep;
  for (nb::handle h : {nb::cast(id), nb::cast(submit), nb::cast(runtime), nb::cast(requested_time),
                       nb::cast(procs), nb::cast(user), nb::cast(user_index)})
    keep.push_back(nb::borrow(h));
  return new PyBatchEnv{std::move(keep), ddppo::BatchEnv(w, accounts, config, seeds), {}, {}};
}

void set_outputs(PyBatchEnv& e, Out<float, -1, -1, -1> jobs, Out<float, -1, -1> cluster,
                 Out<uint8_t, -1, -1> mask, Out<float, -1> reward, Out<uint8_t, -1> done,
                 Out<int64_t, -1> episode_start, Out<double, -1, 4> episode_metrics) {
  size_t b = e.env.size();
  if (jobs.shape(0) != b || cluster.shape(0) != b || mask.shape(0) != b || reward.shape(0) != b ||
      done.shape(0) != b || episode_start.shape(0) != b || episode_metrics.shape(0) != b ||
      jobs.shape(1) != e.env.slots() || mask.shape(1) != e.env.slots() ||
      jobs.shape(2) != e.env.job_features() || cluster.shape(1) != e.env.cluster_features())
    throw std::invalid_argument("output arrays do not match the batch");
  e.outputs = {jobs.data(), cluster.data(),       mask.data(),           reward.data(),
               done.data(), episode_start.data(), episode_metrics.data()};
  e.output_arrays.clear();
  for (nb::handle h : {nb::cast(jobs), nb::cast(cluster), nb::cast(mask), nb::cast(reward),
                       nb::cast(done), nb::cast(episode_start), nb::cast(episode_metrics)})
    e.output_arrays.push_back(nb::borrow(h));
}

const char* policy_name(ddppo::Policy p) {
  static const char* const names[] = {"fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf"};
  return names[static_cast<int>(p)];
}

ddppo::Outputs outputs_of(const PyBatchEnv& e) {
  if (!e.outputs.jobs) throw std::invalid_argument("set_outputs() first");
  return e.outputs;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "ddppo-hpc C++ core: SWF parsing and the cluster simulator";
  m.def("parse_swf", &parse_swf, "text"_a, "skip_bad"_a = false,
        "Parses SWF text: (18 field arrays in file order, header lines as bytes, skipped).");
  m.def("simulate", &simulate, "id"_a, "submit"_a, "runtime"_a, "requested_time"_a, "procs"_a,
        "user"_a, "machine_procs"_a, "policy"_a, "backfill"_a, "begin"_a, "end"_a,
        "estimate"_a = "request",
        "Simulates jobs [begin, end) with a heuristic; returns (start times, metrics).");
  m.attr("JOB_FEATURES") = ddppo::kJobFeatures;
  m.attr("CLUSTER_FEATURES") = ddppo::kClusterFeatures;
  m.attr("HISTORY_JOB_FEATURES") = ddppo::kHistoryJobFeatures;
  m.attr("HISTORY_CLUSTER_FEATURES") = ddppo::kHistoryClusterFeatures;
  m.attr("BACKFILL_CLUSTER_FEATURES") = ddppo::kBackfillClusterFeatures;
  m.attr("RANK_JOB_FEATURES") = ddppo::kRankJobFeatures;
  m.attr("FIT_JOB_FEATURES") = ddppo::kFitJobFeatures;
  nb::class_<PyBatchEnv>(m, "BatchEnv")
      .def(nb::new_(&make_env), "id"_a, "submit"_a, "runtime"_a, "requested_time"_a, "procs"_a,
           "user"_a, "user_index"_a, "users"_a, "machine_procs"_a, "window_jobs"_a, "max_queue"_a,
           "policy"_a, "backfill"_a, "estimate"_a, "reward"_a, "baseline"_a, "dense"_a, "wait"_a,
           "history"_a, "agent_backfill"_a, "heuristic_ranks"_a, "fit_times"_a, "teacher"_a,
           "teacher_jobs"_a, "order_actions"_a, "action_backfills"_a, "seeds"_a)
      .def("__len__", [](const PyBatchEnv& e) { return e.env.size(); })
      .def_prop_ro("slots", [](const PyBatchEnv& e) { return e.env.slots(); })
      .def_prop_ro("job_features", [](const PyBatchEnv& e) { return e.env.job_features(); })
      .def_prop_ro("cluster_features", [](const PyBatchEnv& e) { return e.env.cluster_features(); })
      .def("set_outputs", &set_outputs, "jobs"_a, "cluster"_a, "mask"_a, "reward"_a, "done"_a,
           "episode_start"_a, "episode_metrics"_a,
           "The arrays that reset(), step() and observe() write (kept alive by the env).")
      .def(
          "reset",
          [](PyBatchEnv& e) {
            nb::gil_scoped_release release;
            e.env.reset(outputs_of(e));
          },
          "Starts every environment on a new episode and writes the observations.")
      .def(
          "step",
          [](PyBatchEnv& e, Out<int32_t, -1> actions) {
            if (actions.shape(0) != e.env.size())
              throw std::invalid_argument("one action per environment");
            ddppo::Outputs out = outputs_of(e);
            nb::gil_scoped_release release;
            e.env.step(actions.data(), out);
          },
          "Applies one action per environment and writes what follows.")
      .def(
          "heuristic_actions",
          [](const PyBatchEnv& e, Out<int32_t, -1> actions) {
            if (actions.shape(0) != e.env.size())
              throw std::invalid_argument("one action per environment");
            e.env.heuristic_actions(actions.data());
          },
          "Writes the teacher's pick among each environment's visible jobs (at a backfill "
          "decision, the job its scan would start next).")
      .def(
          "rule_costs",
          [](const PyBatchEnv& e, Out<double, -1, -1> costs, bool arrivals, bool runtimes) {
            if (costs.shape(0) != e.env.size() || costs.shape(1) != e.env.slots())
              throw std::invalid_argument("one row of slots costs per environment");
            nb::gil_scoped_release release;
            e.env.rule_costs(costs.data(), {arrivals, runtimes});
          },
          "costs"_a, "arrivals"_a = true, "runtimes"_a = true,
          "Writes each environment's window avg bsld if it follows each rule from now on "
          "(order actions), and with wait if it waits now and then follows the best rule; "
          "without the later arrivals or the true runtimes, see BatchEnv::rule_costs().")
      .def(
          "teacher", [](const PyBatchEnv& e, size_t i) { return policy_name(e.env.teacher(i)); },
          "i"_a, "The heuristic that heuristic_actions() follows in environment i's episode.")
      .def(
          "last_best",
          [](const PyBatchEnv& e, size_t i) {
            auto [policy, bsld] = e.env.last_best(i);
            return nb::make_tuple(policy_name(policy), bsld);
          },
          "i"_a, "(best heuristic, its avg bsld) of environment i's last finished episode.")
      .def(
          "last_baseline_bsld",
          [](const PyBatchEnv& e, size_t i) { return e.env.last_baseline_bsld(i); }, "i"_a,
          "The reward baseline's avg bsld on environment i's last finished episode's window.")
      .def(
          "episodes", [](const PyBatchEnv& e, size_t i) { return e.env.episodes(i); }, "i"_a,
          "Episodes started so far by environment i, the current one included.")
      .def(
          "restore",
          [](PyBatchEnv& e, size_t i, uint64_t episode, const std::vector<int32_t>& actions) {
            e.env.restore(i, episode, actions);
          },
          "i"_a, "episode"_a, "actions"_a,
          "Puts environment i back in episode `episode` (0-based) after `actions`.")
      .def(
          "begin_at", [](PyBatchEnv& e, size_t i, size_t start) { e.env.begin_at(i, start); },
          "i"_a, "start"_a, "Starts environment i's episode on the window at `start`.")
      .def(
          "last_start_times",
          [](const PyBatchEnv& e, size_t i) {
            return to_numpy(std::vector<double>(e.env.last_start_times(i)));
          },
          "i"_a, "Start times of the jobs of environment i's last finished episode.")
      .def(
          "observe", [](PyBatchEnv& e) { e.env.observe(outputs_of(e)); },
          "Writes every environment's current observation.");
  ddppo_bindings::bind_gpu(m);
}
