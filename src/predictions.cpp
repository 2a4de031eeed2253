#include "predictions.hpp"

#include <unordered_map>

namespace ddppo {

UserHistory::UserHistory(const Workload& w, size_t begin, size_t end)
    : w_(w), begin_(begin), user_(end - begin, -1) {
  std::unordered_map<int64_t, int32_t> index;
  for (size_t j = begin; j < end && w_.user; ++j) {
    if (w_.user[j] < 0) continue;  // unknown (SWF's -1): no history
    auto [it, added] = index.emplace(w_.user[j], static_cast<int32_t>(index.size()));
    user_[j - begin] = it->second;
  }
  users_.resize(index.size());
}

int32_t UserHistory::complete(int32_t job, double end) {
  const int32_t u = user_[job - begin_];
  if (u < 0) return -1;
  User& h = users_[u];
  const Completed c{end, job};
  auto later = [](const Completed& a, const Completed& b) {
    return a.end > b.end || (a.end == b.end && a.job > b.job);
  };
  if (h.count == 0 || later(c, h.last[0])) {
    h.last[1] = h.last[0];
    h.last[0] = c;
  } else if (h.count == 1 || later(c, h.last[1])) {
    h.last[1] = c;
  } else {
    return -1;  // older than the two kept
  }
  h.count = std::min(h.count + 1, 2);
  const double latest = w_.runtime[h.last[0].job];
  h.mean = h.count == 1 ? latest : (latest + w_.runtime[h.last[1].job]) / 2;
  return u;
}

void PredictedEnds::add(int32_t job, double predicted_end, double request_end) {
  Ahead a{predicted_end, job, request_end};
  ahead_.insert(std::upper_bound(ahead_.begin(), ahead_.end(), a), a);
}

void PredictedEnds::remove(int32_t job, double predicted_end, double request_end) {
  Ahead a{predicted_end, job, request_end};
  auto it = std::lower_bound(ahead_.begin(), ahead_.end(), a);
  if (it != ahead_.end() && it->job == job) {
    ahead_.erase(it);
    return;
  }
  Running r{request_end, job};
  overdue_.erase(std::lower_bound(overdue_.begin(), overdue_.end(), r));
}

const std::vector<Running>& PredictedEnds::at(double now) {
  // Jobs whose predicted end has come move to the overdue ones, for good.
  auto past = ahead_.begin();
  for (; past != ahead_.end() && past->predicted_end <= now; ++past) {
    Running r{past->request_end, past->job};
    overdue_.insert(std::upper_bound(overdue_.begin(), overdue_.end(), r), r);
  }
  ahead_.erase(ahead_.begin(), past);
  // Both lists are sorted by their estimated ends at now (max(., now) keeps the order).
  ends_.clear();
  size_t i = 0, k = 0;
  while (i < overdue_.size() || k < ahead_.size()) {
    double late = i < overdue_.size() ? std::max(overdue_[i].estimated_end, now) : 0;
    if (k == ahead_.size() || (i < overdue_.size() && late <= ahead_[k].predicted_end))
      ends_.push_back({late, overdue_[i++].job});
    else
      ends_.push_back({ahead_[k].predicted_end, ahead_[k].job}), ++k;
  }
  return ends_;
}

Predictions::Predictions(const Workload& w, size_t begin, size_t end, bool track_ends)
    : w_(w), begin_(begin), track_ends_(track_ends), history_(w, begin, end) {
  if (track_ends_) predicted_run_.resize(end - begin);
}

void Predictions::start(int32_t job, double now, double runtime) {
  if (runtime == 0) {
    ended_at_start_.emplace_back(job, now);
  } else if (track_ends_) {
    double run = predicted_run_[job - begin_] = history_.predict(job);
    ends_.add(job, now + run, now + w_.requested_time[job]);
  }
}

void Predictions::advance(double now) {
  size_t kept = 0;
  for (auto [job, started] : ended_at_start_)
    if (started >= now)
      ended_at_start_[kept++] = {job, started};
    else if (!frozen_)
      changed(history_.complete(job, started));
  ended_at_start_.resize(kept);
}

void Predictions::end(int32_t job, double started, double end) {
  if (!frozen_) changed(history_.complete(job, end));
  if (track_ends_)
    ends_.remove(job, started + predicted_run_[job - begin_], started + w_.requested_time[job]);
}

}  // namespace ddppo
