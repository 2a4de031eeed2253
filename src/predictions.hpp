// EASY++ runtime predictions (Tsafrir, Etsion and Feitelson, IEEE TPDS 2007), as in
// docs/simulation.md, "Runtime predictions (EASY++)": a job's prediction is the mean runtime
// of its user's two most recently completed jobs, capped by its request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "workload.hpp"

namespace ddppo {

// A running job and the end that backfilling estimates for it.
struct Running {
  double estimated_end;
  int32_t job;
  bool operator<(const Running& o) const {
    return estimated_end < o.estimated_end || (estimated_end == o.estimated_end && job < o.job);
  }
};

// Per user of a window, the two most recently completed jobs; the window starts with none.
class UserHistory {
 public:
  UserHistory(const Workload& w, size_t begin, size_t end);
  // Job `job` of the window ended at `end`: its runtime joins its user's history. Calls may
  // come in any order: "most recent" is by (end, job index), and job index is (submit, id).
  // Returns the user's index if the two most recent changed, else -1.
  int32_t complete(int32_t job, double end);
  // p(J, t) with the history as it stands at t: the request without history, else the mean
  // of the last two runtimes (or the only one) capped by the request.
  double predict(int32_t job) const {
    return predict_for(user_[job - begin_], w_.requested_time[job]);
  }
  // The same for a job of user u (user_index(), -1 if unknown) and this request: a group of
  // waiting jobs with one user and one request is predicted without reading their rows.
  double predict_for(int32_t u, double request) const {
    if (u < 0 || users_[u].count == 0) return request;
    return std::min(users_[u].mean, request);
  }
  int32_t user_index(int32_t job) const { return user_[job - begin_]; }
  // Per job of the window, its user_index(); how many users there are.
  const std::vector<int32_t>& user_indexes() const { return user_; }
  size_t users() const { return users_.size(); }
  // The completed jobs that predict(job) averages: how many (0 to 2), and the i-th most
  // recent of them (i < recent_count(job)).
  int recent_count(int32_t job) const {
    const int32_t u = user_[job - begin_];
    return u < 0 ? 0 : users_[u].count;
  }
  int32_t recent(int32_t job, int i) const { return users_[user_[job - begin_]].last[i].job; }

 private:
  struct Completed {
    double end;
    int32_t job;
  };
  struct User {
    Completed last[2];  // [0] the most recent
    int count = 0;      // how many of last[] hold a job
    double mean = 0;    // of their runtimes
  };

  Workload w_;
  size_t begin_;
  std::vector<int32_t> user_;  // per job of the window: index into users_, -1 if unknown
  std::vector<User> users_;
};

// The running jobs' estimated ends with `estimate = predicted`: start + p_run while that is
// after now, else (the job outran its prediction) max(start + requested_time, now).
class PredictedEnds {
 public:
  void add(int32_t job, double predicted_end, double request_end);
  // The same ends as add() was given.
  void remove(int32_t job, double predicted_end, double request_end);
  // Every running job with its estimated end at `now` (never below now), by estimated end;
  // valid until the next call. `now` never decreases from one call to the next.
  const std::vector<Running>& at(double now);

 private:
  struct Ahead {
    double predicted_end;
    int32_t job;
    double request_end;
    bool operator<(const Ahead& o) const {
      return predicted_end < o.predicted_end || (predicted_end == o.predicted_end && job < o.job);
    }
  };
  std::vector<Ahead> ahead_;      // before their predicted end at the last at(), by that end
  std::vector<Running> overdue_;  // the others, by start + requested_time
  std::vector<Running> ends_;     // at()'s answer
};

// The EASY++ state of one simulated window: the users' history, each running job's p_run
// and, with `estimate = predicted`, the running jobs' predicted ends.
class Predictions {
 public:
  Predictions(const Workload& w, size_t begin, size_t end, bool track_ends);
  double predict(int32_t job) const { return history_.predict(job); }
  double predict_for(int32_t user, double request) const {
    return history_.predict_for(user, request);
  }
  // Job `job` starts at `now` for `runtime` (its p_run is fixed now).
  void start(int32_t job, double now, double runtime);
  // Time has come to `now`: runtime-0 jobs started before now join the history (those
  // started at now are not history before the next event time).
  void advance(double now);
  // Job `job`, started at `started`, ended at `end` (runtime > 0).
  void end(int32_t job, double started, double end);
  // The users whose history changed since clear_changed(), some perhaps more than once.
  const std::vector<int32_t>& changed_users() const { return changed_users_; }
  void clear_changed() { changed_users_.clear(); }
  // From now on the history learns nothing: the predictions stay as they are
  // (Simulator::limit_foresight() without the runtimes).
  void freeze() { frozen_ = true; }
  // PredictedEnds::at(now); only with track_ends.
  const std::vector<Running>& ends_at(double now) { return ends_.at(now); }
  const UserHistory& history() const { return history_; }

 private:
  Workload w_;
  size_t begin_;
  bool track_ends_;
  bool frozen_ = false;
  UserHistory history_;
  std::vector<std::pair<int32_t, double>> ended_at_start_;  // runtime-0 jobs, start
  std::vector<double> predicted_run_;                       // per job of the window: p_run
  PredictedEnds ends_;
  std::vector<int32_t> changed_users_;
  void changed(int32_t user) {
    if (user >= 0) changed_users_.push_back(user);
  }
};

}  // namespace ddppo
