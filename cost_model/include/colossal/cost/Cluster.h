//===- Cluster.h - what the machines can do -------------------------*- C++ -*-===//
//
// A cluster description: nodes of identical GPUs (or CPUs), their peak rates
// by data type, memory and memory bandwidth, the intra-node and inter-node
// links, host memory and the host-device link used for offload, and measured
// efficiency tables.
//
// Peak rates come from vendor datasheets (REFERENCE.md); what a kernel or a
// collective achieves is lower, so every rate is scaled by a measured
// efficiency: GEMM efficiency by problem size (FLOPs per call), and bus
// bandwidth by message size (nccl-tests' "busbw", which already folds in the
// algorithm's 2(n-1)/n factors, so the cost formulas can use one bandwidth
// for every collective). The GPU presets' GEMM plateau and memory-bound
// rate are fitted on published training runs and their fused attention rates
// are FlashAttention-2's published speeds, as `calibration` says;
// `colossal-bench` measures a machine's own.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_CLUSTER_H
#define COLOSSAL_COST_CLUSTER_H

#include "colossal/cost/Curve.h"
#include "colossal/cost/KernelRates.h"
#include "colossal/support/Json.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace colossal::cost {

enum class DType { F32, TF32, BF16, F16, I64, I32, I8 };

/// Bytes per element (TF32 is stored as 4 bytes).
int bytesOf(DType dtype);
const char *nameOf(DType dtype);
std::optional<DType> parseDType(const std::string &name);

struct Link {
  /// Peak unidirectional bandwidth per GPU, bytes/s.
  double bandwidth = 0;
  /// Per-collective latency (alpha), seconds.
  double latency = 0;
  /// Measured bus bandwidth by message size; empty: `bandwidth * efficiency`.
  std::vector<CurvePoint> busBandwidth;
  /// Fraction of `bandwidth` reached when no table is given.
  double efficiency = 1.0;

  double busBandwidthAt(double bytes) const;
};

struct Cluster {
  std::string name;
  std::string description;
  /// Where the numbers come from ("datasheet defaults", "colossal-bench ...").
  std::string calibration;
  int nodes = 1;
  int gpusPerNode = 1;
  std::map<DType, double> peakFlops; // per device, FLOP/s
  double memoryBytes = 0;            // per device
  double memoryBandwidth = 0;        // per device, bytes/s
  Link intraNode, interNode;
  double hostMemoryBytes = 0;        // per node
  double hostDeviceBandwidth = 0;    // per device, bytes/s each way
  double hostMemoryBandwidth = 0;    // per node, bytes/s (CPU optimizer steps)
  /// GEMM efficiency (fraction of peak) by FLOPs per call.
  std::vector<CurvePoint> gemmEfficiency;
  /// Measured kernel rates by shape and kind (KernelRates.h); empty: the
  /// roofline at `peakFlops` x `gemmEfficiency` and `memoryBandwidth`.
  KernelRates kernels;

  /// A measured description (colossal-bench) says which fields it measured
  /// and which it could not: those (a link this machine lacks) are written
  /// as "unmeasured" and read from `fallbackPreset`'s values, so a number
  /// nobody measured is never presented as measured.
  std::vector<std::string> measured;
  std::vector<std::string> unmeasured;
  std::string fallbackPreset;
  /// The fields that may be left unmeasured, by their JSON names.
  static const std::vector<std::string> &fallbackFields();
  /// "measured: ...; from dgx-h100: ..." for reports ("" for a preset).
  std::string provenance() const;

  int devices() const { return nodes * gpusPerNode; }
  double peak(DType dtype) const;
  /// Achievable GEMM rate for one call of `flops` FLOPs.
  double gemmRate(DType dtype, double flops) const;

  Json toJson() const;
  /// Reads and checks a description; `error` names the offending field.
  static std::optional<Cluster> fromJson(const Json &json, std::string &error);

  /// A preset by name ("dgx-a100", "dgx-h100", "h200-node", "host": this
  /// machine's threads and memory) with `nodes` nodes, or nullopt.
  static std::optional<Cluster> preset(const std::string &name, int nodes = 1);
  static std::vector<std::string> presetNames();
  /// A preset by name or a colossal-cluster/1 JSON file; `nodes` nodes of a
  /// preset (a file says its own). `error` names the file and field.
  /// "host" is this machine's measured description when there is one
  /// (`measuredHostFile`), with `nodes` nodes.
  static std::optional<Cluster> load(const std::string &nameOrFile, int nodes, std::string &error);
  /// $COLOSSAL_HOST_CLUSTER, or the colossal-bench description at
  /// $XDG_CONFIG_HOME/colossal/host-cluster.json (~/.config when unset)
  /// when it exists; "" otherwise.
  static std::string measuredHostFile();
};

} // namespace colossal::cost

#endif // COLOSSAL_COST_CLUSTER_H
