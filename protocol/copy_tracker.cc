#include "protocol/copy_tracker.h"

#include <utility>

namespace hugepin {

CopyTracker::CopyTracker(uint16_t rank, Query query, Wait wait)
    : rank_(rank), query_(std::move(query)), wait_(std::move(wait)) {
  if (!query_ || !wait_) throw Error(cat("copy tracker of rank ", rank, ": query and wait callbacks are required"));
}

void CopyTracker::check_event(uint64_t event) const {
  if (event <= last_event_) {
    throw Error(cat("copy tracker of rank ", rank_, ": event ", event, " is not above the last one, ", last_event_,
                    " (events start at 1 and increase on one stream)"));
  }
}

void CopyTracker::copy_launched(JobId job, uint64_t event) {
  check_event(event);
  launches_.push_back(Launch{event, ReportKind::kCopyComplete, job});
  last_event_ = event;
}

void CopyTracker::epoch_launched(Epoch epoch, uint64_t event) {
  check_event(event);
  if (epoch <= last_epoch_) {
    throw Error(cat("copy tracker of rank ", rank_, ": epoch ", epoch, " is not above the last one, ", last_epoch_));
  }
  launches_.push_back(Launch{event, ReportKind::kComputeRelease, epoch});
  last_event_ = event;
  last_epoch_ = epoch;
}

void CopyTracker::copy_failed(JobId job, uint32_t error) {
  failed_.push_back(Failure{job, error});
}

Report CopyTracker::report(ReportKind kind, uint64_t value, uint32_t flags) const {
  Report out{};
  out.kind = kind;
  out.rank = rank_;
  out.flags = flags;
  out.value = value;
  return out;
}

size_t CopyTracker::poll(std::vector<Report>* out) {
  // Ask first, change after: a query that throws leaves the tracker as it was.
  size_t done = 0;
  uint64_t mark = high_water_mark_;
  for (; done < launches_.size(); ++done) {
    uint64_t event = launches_[done].event;
    if (event > mark && !query_(event)) break;
    if (event > mark) mark = event;
  }
  high_water_mark_ = mark;
  return collect(done, out);
}

size_t CopyTracker::flush(std::vector<Report>* out) {
  if (!launches_.empty()) {
    wait_(launches_.back().event);
    if (launches_.back().event > high_water_mark_) high_water_mark_ = launches_.back().event;
  }
  return collect(launches_.size(), out);
}

size_t CopyTracker::collect(size_t done, std::vector<Report>* out) {
  size_t before = out->size();
  for (const Failure& failed : failed_) out->push_back(report(ReportKind::kCopyFailed, failed.job, failed.error));
  failed_.clear();
  Epoch released = 0;
  for (size_t i = 0; i < done; ++i) {
    const Launch& launch = launches_.front();
    if (launch.kind == ReportKind::kComputeRelease) {
      released = launch.value;
    } else {
      out->push_back(report(launch.kind, launch.value, 0));
    }
    launches_.pop_front();
  }
  if (released != 0) out->push_back(report(ReportKind::kComputeRelease, released, 0));
  return out->size() - before;
}

}  // namespace hugepin
