#include "policy.hpp"

#include <stdexcept>

namespace ddppo {

Policy parse_policy(const std::string& name) {
  if (name == "fcfs") return Policy::kFcfs;
  if (name == "sjf") return Policy::kSjf;
  if (name == "wfp3") return Policy::kWfp3;
  if (name == "unicep") return Policy::kUnicep;
  if (name == "f1") return Policy::kF1;
  if (name == "sjbf") return Policy::kSjbf;
  throw std::invalid_argument("unknown policy '" + name + "' (fcfs, sjf, wfp3, unicep, f1, sjbf)");
}

Backfill parse_backfill(const std::string& name) {
  if (name == "none") return Backfill::kNone;
  if (name == "easy") return Backfill::kEasy;
  if (name == "conservative") return Backfill::kConservative;
  throw std::invalid_argument("unknown backfill '" + name + "' (none, easy, conservative)");
}

Estimate parse_estimate(const std::string& name) {
  if (name == "request") return Estimate::kRequest;
  if (name == "predicted") return Estimate::kPredicted;
  throw std::invalid_argument("unknown estimate '" + name + "' (request, predicted)");
}

}  // namespace ddppo
