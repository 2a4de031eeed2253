// The waiting jobs' indexes as jobs arrive and leave the queue: index_ (FCFS, SJF, F1) or
// groups_ (WFP3, UNICEP, SJBF; FCFS's, SJF's and F1's conservative scans where
// plans_by_groups()), and the groups' heads kept in order (SJBF's, FCFS's, SJF's and F1's:
// simulator.hpp, ordered_heads_ and sjbf_picks_).
#include <utility>

#include "simulator.hpp"

namespace ddppo {

void Simulator::index_add(int32_t job) {
  if (index_) index_->add(job);
  if (!groups_) return;
  groups_->add(job);
  const size_t g = groups_->group(job);
  if (groups_->oldest_of(g) != job) return;
  // The group's first waiting job (jobs come in index order).
  if (head_tournament_) head_tournament_->set(g, job, w_.submit[job]);
  if (predicted_groups()) group_predictions_[g] = group_prediction(g);
  if (tracks_user_groups())
    if (const int32_t u = group_users_[g]; u >= 0) {
      user_at_[g] = static_cast<uint32_t>(user_groups_[u].size());
      user_groups_[u].push_back(static_cast<uint32_t>(g));
    }
  if (sjbf_picks_) sjbf_move(g, -1, job);
  if (!keep_heads_) return;
  if (policy_ == Policy::kSjbf && in_capped(g)) {
    capped_jobs_[group_users_[g]].insert(job);
    settle_capped(group_users_[g]);
  } else {
    ordered_heads_.insert(head(g, job));
  }
}

void Simulator::index_remove(int32_t job) {
  if (index_) index_->remove(job);
  if (!groups_) return;
  const size_t g = groups_->group(job);
  const bool oldest = groups_->oldest_of(g) == job;
  groups_->remove(job);
  if (!oldest) return;
  const int32_t next = groups_->oldest_of(g);
  if (head_tournament_) head_tournament_->set(g, next, next >= 0 ? w_.submit[next] : 0);
  if (next < 0 && tracks_user_groups())
    if (const int32_t u = group_users_[g]; u >= 0) {
      std::vector<uint32_t>& list = user_groups_[u];
      user_at_[list.back()] = user_at_[g];
      list[user_at_[g]] = list.back();
      list.pop_back();
    }
  if (sjbf_picks_) sjbf_move(g, job, next);
  if (!keep_heads_) return;
  if (policy_ == Policy::kSjbf && in_capped(g)) {
    std::set<int32_t>& jobs = capped_jobs_[group_users_[g]];
    jobs.erase(job);
    if (next >= 0) jobs.insert(next);
    settle_capped(group_users_[g]);
  } else if (auto node = ordered_heads_.extract(head(g, job)); next >= 0) {
    node.value() = head(g, next);
    ordered_heads_.insert(std::move(node));
  }
}

// Group g's oldest waiting job was `was` and is `now` (-1: none).
void Simulator::sjbf_move(size_t g, int32_t was, int32_t now) {
  const int32_t u = group_users_[g];
  sjbf_picks_->move(u, group_key(g), was, now, sjbf_capped(u));
}

// User u's history changed: its entry moves to its new capped score, and the groups whose key
// lies between the old and the new one join it or take entries of their own.
void Simulator::sjbf_rekey(int32_t u) {
  const double was = user_capped_[u], now = sjbf_capped(u);
  if (now == was) return;
  user_capped_[u] = now;
  for (uint32_t g : user_groups_[u]) {
    const double key = group_key(g);
    const bool capped = now < key;
    if (capped == (was < key)) continue;
    const int32_t oldest = groups_->oldest_of(g);
    if (capped) {
      ordered_heads_.erase({key, oldest});
      capped_jobs_[u].insert(oldest);
    } else {
      capped_jobs_[u].erase(oldest);
      ordered_heads_.insert({key, oldest});
    }
  }
  settle_capped(u);
}

// User u's entry in ordered_heads_ after a change of its capped score or capped_jobs_.
void Simulator::settle_capped(int32_t u) {
  const std::set<int32_t>& jobs = capped_jobs_[u];
  const Keyed entry = jobs.empty() ? Keyed{0, -1} : Keyed{user_capped_[u], *jobs.begin()};
  Keyed& was = capped_entry_[u];
  if (entry == was) return;
  if (was.second >= 0) ordered_heads_.erase(was);
  if (entry.second >= 0) ordered_heads_.insert(entry);
  was = entry;
}

}  // namespace ddppo
