#include "common/metrics.h"

#include <gtest/gtest.h>

namespace switchyard {
namespace {

TEST(MetricsTest, RendersCountersGroupedByFamily) {
  MetricsRegistry registry;
  Counter& a = registry.AddCounter("requests_total", "Requests", {{"method", "getSlot"}});
  Gauge& g = registry.AddGauge("slot", "Slot");
  Counter& b = registry.AddCounter("requests_total", "Requests", {{"method", "getBalance"}});
  a.Increment(3);
  b.Increment();
  g.Set(42);
  const std::string text = registry.RenderPrometheus();
  EXPECT_EQ(text,
            "# HELP requests_total Requests\n"
            "# TYPE requests_total counter\n"
            "requests_total{method=\"getSlot\"} 3\n"
            "requests_total{method=\"getBalance\"} 1\n"
            "# HELP slot Slot\n"
            "# TYPE slot gauge\n"
            "slot 42\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("latency_seconds", "Latency", {0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_NEAR(h.sum(), 5.55, 1e-6);
  const std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find("latency_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("latency_seconds_count 3\n"), std::string::npos) << text;
}

TEST(MetricsTest, EscapesLabelValues) {
  MetricsRegistry registry;
  registry.AddCounter("x_total", "X", {{"k", "a\"b\\c"}}).Increment();
  EXPECT_NE(registry.RenderPrometheus().find("x_total{k=\"a\\\"b\\\\c\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace switchyard
