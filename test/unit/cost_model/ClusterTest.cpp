//===- ClusterTest.cpp - presets and the JSON format ----------------------===//

#include "colossal/cost/Cluster.h"

#include <gtest/gtest.h>

using namespace colossal::cost;

TEST(Cluster, PresetsCarryDatasheetPeaks) {
  auto a100 = Cluster::preset("dgx-a100", 4);
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->devices(), 32);
  EXPECT_DOUBLE_EQ(a100->peak(DType::BF16), 312e12);
  EXPECT_DOUBLE_EQ(a100->memoryBytes, 80e9);
  auto h200 = Cluster::preset("h200-node");
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->memoryBytes, 141e9);
  EXPECT_DOUBLE_EQ(h200->memoryBandwidth, 4.8e12);
  EXPECT_FALSE(Cluster::preset("tpu-v9"));
}

TEST(Cluster, JsonRoundTrips) {
  Cluster original = *Cluster::preset("dgx-h100", 2);
  std::string text = original.toJson().dump(), error;
  auto parsed = Json::parse(text, error);
  ASSERT_TRUE(parsed) << error;
  auto back = Cluster::fromJson(*parsed, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->toJson().dump(), text);
}

TEST(Cluster, BadDescriptionsNameTheField) {
  std::string error;
  auto json = Json::parse(R"({"name": "x", "nodes": 1, "devices_per_node": 8,
      "peak_flops": {"bf16": 1e15}, "memory_bytes": 8e10, "memory_bandwidth_bytes_per_s": 2e12,
      "intra_node": {"bandwidth_bytes_per_s": -1}, "inter_node": {"bandwidth_bytes_per_s": 1e10}})",
                          error);
  ASSERT_TRUE(json) << error;
  EXPECT_FALSE(Cluster::fromJson(*json, error));
  EXPECT_EQ(error, "intra_node.bandwidth_bytes_per_s: expected a positive number");
  EXPECT_FALSE(Json::parse("{\"a\": [1, 2,\n ]}", error));
  EXPECT_EQ(error, "line 2, column 2: expected a value");
}

// A measured description leaves what it could not measure to a preset, and
// says so: the reader takes the preset's values and lists them.
TEST(Cluster, UnmeasuredFieldsComeFromTheFallbackPreset) {
  Cluster measured = *Cluster::preset("dgx-a100");
  measured.name = "bench";
  measured.intraNode.bandwidth = 7e9;
  measured.interNode.bandwidth = 1.0; // never written: unmeasured
  measured.measured = {"peak_flops", "intra_node"};
  measured.unmeasured = {"inter_node", "host_device_bandwidth_bytes_per_s"};
  measured.fallbackPreset = "dgx-h100";
  std::string text = measured.toJson().dump(), error;
  EXPECT_NE(text.find("\"inter_node\": \"unmeasured\""), std::string::npos) << text;
  auto parsed = Json::parse(text, error);
  ASSERT_TRUE(parsed) << error;
  auto back = Cluster::fromJson(*parsed, error);
  ASSERT_TRUE(back) << error;
  Cluster h100 = *Cluster::preset("dgx-h100");
  EXPECT_DOUBLE_EQ(back->interNode.bandwidth, h100.interNode.bandwidth);
  EXPECT_DOUBLE_EQ(back->hostDeviceBandwidth, h100.hostDeviceBandwidth);
  EXPECT_DOUBLE_EQ(back->intraNode.bandwidth, 7e9);
  EXPECT_EQ(back->unmeasured, measured.unmeasured);
  EXPECT_EQ(back->provenance(), "measured: peak_flops, intra_node; unmeasured, taken from dgx-h100: inter_node, "
                                "host_device_bandwidth_bytes_per_s");
  // Written back, still unmeasured.
  EXPECT_EQ(back->toJson().dump(), text);
  // No preset to take it from: an error naming the field.
  auto orphan = Json::parse(R"({"name": "x", "nodes": 1, "devices_per_node": 8,
      "peak_flops": {"bf16": 1e15}, "memory_bytes": 8e10, "memory_bandwidth_bytes_per_s": 2e12,
      "intra_node": {"bandwidth_bytes_per_s": 1e11}, "inter_node": "unmeasured"})",
                            error);
  ASSERT_TRUE(orphan) << error;
  EXPECT_FALSE(Cluster::fromJson(*orphan, error));
  EXPECT_EQ(error, "inter_node: unmeasured, and the description names no known fallback_preset to take it from "
                   "(none given)");
}

TEST(Cluster, EfficiencyCurvesInterpolateInLogSize) {
  std::vector<CurvePoint> curve{{1e6, 0.1}, {1e8, 0.5}};
  EXPECT_DOUBLE_EQ(interpolate(curve, 1e5), 0.1);
  EXPECT_DOUBLE_EQ(interpolate(curve, 1e9), 0.5);
  EXPECT_NEAR(interpolate(curve, 1e7), 0.3, 1e-12);
}
