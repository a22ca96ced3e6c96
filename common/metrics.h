#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace switchyard {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing count. Any thread may increment it.
class Counter {
 public:
  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Any thread may set it.
class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A distribution over fixed bucket bounds (Prometheus "le" semantics). Any thread may
// observe into it.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Cumulative count per bound, then the +Inf count.
  std::vector<uint64_t> CumulativeCounts() const;
  double sum() const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // one per bound, plus +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};  // sum kept in millionths to stay atomic
};

// Owns the metrics of a process. Each module declares its metrics in one place (a struct
// built from the registry) and keeps the returned references; the registry outlives them.
// Registration and rendering are thread-safe; updates never take the registry's lock.
class MetricsRegistry {
 public:
  Counter& AddCounter(std::string name, std::string help, MetricLabels labels = {});
  Gauge& AddGauge(std::string name, std::string help, MetricLabels labels = {});
  Histogram& AddHistogram(std::string name, std::string help, std::vector<double> upper_bounds,
                          MetricLabels labels = {});

  // The Prometheus text exposition format, version 0.0.4.
  std::string RenderPrometheus() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  Entry& AddEntry(std::string name, std::string help, MetricLabels labels)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

// Default latency buckets in seconds, from 10 µs to 10 s.
std::vector<double> LatencyBucketsSeconds();

}  // namespace switchyard
