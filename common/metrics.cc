#include "common/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace switchyard {
namespace {

std::string RenderLabels(const MetricLabels& labels, const std::string& extra_key = "",
                         const std::string& extra_value = "") {
  if (labels.empty() && extra_key.empty()) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, k, "=\"",
                    absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\"");
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_key.empty()) add(extra_key, extra_value);
  out += "}";
  return out;
}

std::string FormatBound(double bound) { return absl::StrCat(bound); }

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      buckets_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  std::sort(upper_bounds_.begin(), upper_bounds_.end());
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t index =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  if (value > 0) {
    sum_micros_.fetch_add(static_cast<uint64_t>(std::llround(value * 1e6)),
                          std::memory_order_relaxed);
  }
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

double Histogram::sum() const {
  return static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6;
}

MetricsRegistry::Entry& MetricsRegistry::AddEntry(std::string name, std::string help,
                                                  MetricLabels labels) {
  auto entry = std::make_unique<Entry>();
  entry->name = std::move(name);
  entry->help = std::move(help);
  entry->labels = std::move(labels);
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

Counter& MetricsRegistry::AddCounter(std::string name, std::string help, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  Entry& e = AddEntry(std::move(name), std::move(help), std::move(labels));
  e.counter = std::make_unique<Counter>();
  return *e.counter;
}

Gauge& MetricsRegistry::AddGauge(std::string name, std::string help, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  Entry& e = AddEntry(std::move(name), std::move(help), std::move(labels));
  e.gauge = std::make_unique<Gauge>();
  return *e.gauge;
}

Histogram& MetricsRegistry::AddHistogram(std::string name, std::string help,
                                         std::vector<double> upper_bounds, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  Entry& e = AddEntry(std::move(name), std::move(help), std::move(labels));
  e.histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  return *e.histogram;
}

std::string MetricsRegistry::RenderPrometheus() const {
  absl::MutexLock lock(&mu_);
  // Series of one family are rendered together, families in registration order.
  absl::flat_hash_map<std::string, size_t> family_order;
  for (const auto& e : entries_) family_order.try_emplace(e->name, family_order.size());
  std::vector<const Entry*> sorted;
  for (const auto& e : entries_) sorted.push_back(e.get());
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Entry* a, const Entry* b) {
    return family_order.at(a->name) < family_order.at(b->name);
  });
  std::string out;
  std::string last_family;
  for (const Entry* e : sorted) {
    if (e->name != last_family) {
      const char* type = e->counter ? "counter" : e->gauge ? "gauge" : "histogram";
      absl::StrAppend(&out, "# HELP ", e->name, " ", e->help, "\n# TYPE ", e->name, " ", type,
                      "\n");
      last_family = e->name;
    }
    if (e->counter) {
      absl::StrAppend(&out, e->name, RenderLabels(e->labels), " ", e->counter->value(), "\n");
    } else if (e->gauge) {
      absl::StrAppend(&out, e->name, RenderLabels(e->labels), " ", e->gauge->value(), "\n");
    } else {
      const auto counts = e->histogram->CumulativeCounts();
      const auto& bounds = e->histogram->upper_bounds();
      for (size_t i = 0; i < bounds.size(); ++i) {
        absl::StrAppend(&out, e->name, "_bucket",
                        RenderLabels(e->labels, "le", FormatBound(bounds[i])), " ", counts[i],
                        "\n");
      }
      absl::StrAppend(&out, e->name, "_bucket", RenderLabels(e->labels, "le", "+Inf"), " ",
                      counts.back(), "\n");
      absl::StrAppend(&out, e->name, "_sum", RenderLabels(e->labels), " ", e->histogram->sum(),
                      "\n");
      absl::StrAppend(&out, e->name, "_count", RenderLabels(e->labels), " ", e->histogram->count(),
                      "\n");
    }
  }
  return out;
}

std::vector<double> LatencyBucketsSeconds() {
  return {1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
          2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0,  2.5,  5.0,    10.0};
}

}  // namespace switchyard
