// The waiting jobs' indexes as jobs arrive and leave the queue: index_ (FCFS, SJF, F1) or
// groups_ (WFP3, UNICEP, SJBF; FCFS's and SJF's conservative scans where plans_by_groups()), and
// the groups' heads kept in order (SJBF's, FCFS's and SJF's: simulator.hpp, ordered_heads_ and
// sjbf_picks_).
#include <utility>

#include "simulator.hpp"

namespace ddppo {

void Simulator::index_add(int32_t job) {
  if (index_) index_->add(job);
  if (!groups_) return;
  groups_->add(job);
  const size_t g = groups_->group(job);
  if ((!sjbf_picks_ && !keep_heads_) || groups_->oldest_of(g) != job) return;
  // The group's first waiting job (jobs come in index order).
  if (sjbf_picks_) sjbf_move(g, -1, job);
  if (!keep_heads_) return;
  if (policy_ == Policy::kSjbf) sjbf_keys_[g] = sjbf_score_of(g);
  ordered_heads_.insert(head(g, job));
  if (policy_ != Policy::kSjbf) return;
  if (const int32_t u = group_users_[g]; u >= 0) {
    user_at_[g] = static_cast<uint32_t>(user_groups_[u].size());
    user_groups_[u].push_back(static_cast<uint32_t>(g));
  }
}

void Simulator::index_remove(int32_t job) {
  if (index_) index_->remove(job);
  if (!groups_) return;
  const size_t g = groups_->group(job);
  const bool oldest = groups_->oldest_of(g) == job;
  groups_->remove(job);
  if (!oldest) return;
  if (sjbf_picks_) sjbf_move(g, job, groups_->oldest_of(g));
  if (!keep_heads_) return;
  auto node = ordered_heads_.extract(head(g, job));
  if (const int32_t next = groups_->oldest_of(g); next >= 0) {
    node.value() = head(g, next);
    ordered_heads_.insert(std::move(node));
  } else if (const int32_t u = policy_ == Policy::kSjbf ? group_users_[g] : -1; u >= 0) {
    std::vector<uint32_t>& list = user_groups_[u];
    user_at_[list.back()] = user_at_[g];
    list[user_at_[g]] = list.back();
    list.pop_back();
  }
}

// Group g's oldest waiting job was `was` and is `now` (-1: none).
void Simulator::sjbf_move(size_t g, int32_t was, int32_t now) {
  const int32_t u = group_users_[g];
  sjbf_picks_->move(u, at_least_tenth(groups_->request_of(g)), was, now, sjbf_capped(u));
}

// User u's history changed: its groups with waiting jobs move to their new predictions.
void Simulator::sjbf_rekey(int32_t u) {
  for (uint32_t g : user_groups_[u]) {
    const double key = sjbf_score_of(g);
    if (key == sjbf_keys_[g]) continue;
    auto node = ordered_heads_.extract(head(g, groups_->oldest_of(g)));
    node.value().first = sjbf_keys_[g] = key;
    ordered_heads_.insert(std::move(node));
  }
}

}  // namespace ddppo
