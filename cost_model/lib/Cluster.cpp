//===- Cluster.cpp - cluster descriptions and presets ---------------------===//

#include "colossal/cost/Cluster.h"
#include "JsonFields.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace colossal::cost {

int bytesOf(DType dtype) {
  switch (dtype) {
  case DType::F32: case DType::TF32: case DType::I32: return 4;
  case DType::BF16: case DType::F16: return 2;
  case DType::I64: return 8;
  case DType::I8: return 1;
  }
  return 4;
}

const char *nameOf(DType dtype) {
  switch (dtype) {
  case DType::F32: return "fp32";
  case DType::TF32: return "tf32";
  case DType::BF16: return "bf16";
  case DType::F16: return "fp16";
  case DType::I64: return "int64";
  case DType::I32: return "int32";
  case DType::I8: return "int8";
  }
  return "?";
}

std::optional<DType> parseDType(const std::string &name) {
  for (DType d : {DType::F32, DType::TF32, DType::BF16, DType::F16, DType::I64, DType::I32,
                  DType::I8})
    if (name == nameOf(d))
      return d;
  return std::nullopt;
}

double interpolate(const std::vector<CurvePoint> &curve, double size) {
  if (curve.empty())
    return 0;
  if (size <= curve.front().size)
    return curve.front().value;
  if (size >= curve.back().size)
    return curve.back().value;
  for (size_t i = 1; i < curve.size(); ++i) {
    if (size > curve[i].size)
      continue;
    double x0 = std::log(curve[i - 1].size), x1 = std::log(curve[i].size);
    double t = (std::log(size) - x0) / (x1 - x0);
    return curve[i - 1].value + t * (curve[i].value - curve[i - 1].value);
  }
  return curve.back().value;
}

double Link::busBandwidthAt(double bytes) const {
  if (!busBandwidth.empty())
    return interpolate(busBandwidth, bytes);
  return bandwidth * efficiency;
}

double Cluster::peak(DType dtype) const {
  auto it = peakFlops.find(dtype);
  if (it != peakFlops.end())
    return it->second;
  // Half-precision tensor-core rates apply to both 16-bit types.
  if (dtype == DType::F16 && peakFlops.count(DType::BF16))
    return peakFlops.at(DType::BF16);
  if (dtype == DType::BF16 && peakFlops.count(DType::F16))
    return peakFlops.at(DType::F16);
  return peakFlops.count(DType::F32) ? peakFlops.at(DType::F32) : 0;
}

double Cluster::gemmRate(DType dtype, double flops) const {
  double efficiency = gemmEfficiency.empty() ? 1.0 : interpolate(gemmEfficiency, flops);
  return peak(dtype) * efficiency;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

Json curveToJson(const std::vector<CurvePoint> &curve, const char *sizeKey, const char *valueKey) {
  Json::Array points;
  for (const CurvePoint &p : curve)
    points.push_back(Json::Object{{sizeKey, p.size}, {valueKey, p.value}});
  return points;
}

static Json linkToJson(const Link &link) {
  Json::Object o{{"bandwidth_bytes_per_s", link.bandwidth},
                 {"latency_s", link.latency},
                 {"efficiency", link.efficiency}};
  if (!link.busBandwidth.empty())
    o["bus_bandwidth"] = curveToJson(link.busBandwidth, "bytes", "bytes_per_s");
  return o;
}

const std::vector<std::string> &Cluster::fallbackFields() {
  static const std::vector<std::string> fields = {"intra_node", "inter_node", "host_device_bandwidth_bytes_per_s",
                                                  "host_memory_bandwidth_bytes_per_s"};
  return fields;
}

std::string Cluster::provenance() const {
  auto list = [](const std::vector<std::string> &items) {
    std::string text;
    for (const std::string &item : items)
      text += (text.empty() ? "" : ", ") + item;
    return text;
  };
  std::string text;
  if (!measured.empty())
    text = "measured: " + list(measured);
  if (!unmeasured.empty())
    text += (text.empty() ? "" : "; ") + std::string("unmeasured, taken from ") + fallbackPreset + ": " +
            list(unmeasured);
  return text;
}

Json Cluster::toJson() const {
  Json::Object peaks;
  for (const auto &[dtype, flops] : peakFlops)
    peaks[nameOf(dtype)] = flops;
  Json::Object o{
      {"format", "colossal-cluster/1"},
      {"name", name},
      {"description", description},
      {"calibration", calibration},
      {"nodes", nodes},
      {"devices_per_node", gpusPerNode},
      {"peak_flops", peaks},
      {"memory_bytes", memoryBytes},
      {"memory_bandwidth_bytes_per_s", memoryBandwidth},
      {"intra_node", linkToJson(intraNode)},
      {"inter_node", linkToJson(interNode)},
      {"host_memory_bytes", hostMemoryBytes},
      {"host_device_bandwidth_bytes_per_s", hostDeviceBandwidth},
      {"host_memory_bandwidth_bytes_per_s", hostMemoryBandwidth},
      {"gemm_efficiency", curveToJson(gemmEfficiency, "flops", "efficiency")},
  };
  if (!kernels.empty())
    o["kernels"] = kernels.toJson();
  if (!measured.empty())
    o["measured"] = Json(Json::Array(measured.begin(), measured.end()));
  if (!unmeasured.empty()) {
    for (const std::string &field : unmeasured)
      o[field] = "unmeasured";
    o["fallback_preset"] = fallbackPreset;
  }
  return o;
}

std::optional<Cluster> Cluster::fromJson(const Json &json, std::string &error) {
  error.clear();
  if (!json.isObject()) {
    error = "a cluster description is a JSON object";
    return std::nullopt;
  }
  FieldReader r{json, "", error};
  Cluster c;
  std::string format = r.string("format");
  if (!format.empty() && format != "colossal-cluster/1" && error.empty())
    error = "format: \"" + format + "\" is not colossal-cluster/1";
  c.name = r.string("name", true);
  c.description = r.string("description");
  c.calibration = r.string("calibration");
  c.nodes = int(r.number("nodes"));
  c.gpusPerNode = int(r.number("devices_per_node"));
  if (const Json *peaks = r.get("peak_flops", true)) {
    if (!peaks->isObject() && error.empty())
      error = "peak_flops: expected an object of dtype: FLOP/s";
    else if (peaks->isObject())
      for (const auto &[key, value] : peaks->asObject()) {
        auto dtype = parseDType(key);
        if (!dtype || !value.isNumber() || !(value.asNumber() > 0)) {
          if (error.empty())
            error = "peak_flops." + key + ": expected a known dtype with a positive rate";
          continue;
        }
        c.peakFlops[*dtype] = value.asNumber();
      }
  }
  c.memoryBytes = r.number("memory_bytes");
  c.memoryBandwidth = r.number("memory_bandwidth_bytes_per_s");
  // Fields a measuring tool could not measure: the fallback preset's values.
  c.fallbackPreset = r.string("fallback_preset");
  std::optional<Cluster> fallback;
  for (const std::string &field : fallbackFields()) {
    const Json *value = json.find(field);
    if (!value || !value->isString())
      continue;
    if (value->asString() != "unmeasured") {
      if (error.empty())
        error = field + ": expected a measurement or \"unmeasured\", not \"" + value->asString() + "\"";
      continue;
    }
    if (!fallback)
      fallback = preset(c.fallbackPreset);
    if (!fallback) {
      if (error.empty())
        error = field + ": unmeasured, and the description names no known fallback_preset to take it from (" +
                (c.fallbackPreset.empty() ? std::string("none given") : "\"" + c.fallbackPreset + "\"") + ")";
      continue;
    }
    c.unmeasured.push_back(field);
  }
  auto unmeasuredField = [&](const std::string &field) {
    return std::find(c.unmeasured.begin(), c.unmeasured.end(), field) != c.unmeasured.end();
  };
  c.intraNode = unmeasuredField("intra_node") ? fallback->intraNode : r.link("intra_node");
  c.interNode = unmeasuredField("inter_node") ? fallback->interNode : r.link("inter_node");
  c.hostMemoryBytes = r.number("host_memory_bytes", false);
  c.hostDeviceBandwidth = unmeasuredField("host_device_bandwidth_bytes_per_s")
                              ? fallback->hostDeviceBandwidth
                              : r.number("host_device_bandwidth_bytes_per_s", false);
  c.hostMemoryBandwidth = unmeasuredField("host_memory_bandwidth_bytes_per_s")
                              ? fallback->hostMemoryBandwidth
                              : r.number("host_memory_bandwidth_bytes_per_s", false);
  if (const Json *measured = json.find("measured")) {
    if (!measured->isArray()) {
      if (error.empty())
        error = "measured: expected an array of field names";
    } else {
      for (const Json &item : measured->asArray())
        if (item.isString())
          c.measured.push_back(item.asString());
    }
  }
  c.gemmEfficiency = r.curve("gemm_efficiency", "flops", "efficiency");
  for (const CurvePoint &p : c.gemmEfficiency)
    if (p.value > 1 && error.empty())
      error = "gemm_efficiency: an efficiency above 1 (" + std::to_string(p.value) + ")";
  if (const Json *kernels = json.find("kernels"))
    c.kernels = KernelRates::fromJson(*kernels, "kernels", error);
  if (c.peakFlops.empty() && error.empty())
    error = "peak_flops: no rates given";
  if (!error.empty())
    return std::nullopt;
  return c;
}

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

namespace {

constexpr double GB = 1e9, TB = 1e12, TFLOPS = 1e12;

/// The shape of GEMM efficiency by FLOPs per call: small calls are
/// launch-bound, large ones reach a plateau (80% of the tensor-core peak
/// here), which `calibrate` scales to the device's fitted one.
std::vector<CurvePoint> defaultGemmEfficiency() {
  return {{1e6, 0.02}, {1e8, 0.2}, {1e9, 0.45}, {1e10, 0.65}, {1e11, 0.75}, {1e12, 0.8}};
}

/// The fused attention kernel (FlashAttention-2) by key length, head
/// dimension 128, as a fraction of the BF16 peak in this model's convention:
/// the whole score matrix's FLOPs (forward 4 b h s^2 d, backward twice that)
/// over the kernel's time. H100 SXM5: Shah et al., "FlashAttention-3"
/// (arXiv:2407.08608), figures of forward and backward speed, FlashAttention-2
/// bars: non-causal forward 309-370 TFLOP/s and backward 214-322 (counted as
/// 2.5 forwards there, hence 0.8x here), causal forward 191-335 (counting
/// half the matrix there, hence 2x here). The causal backward is not
/// plotted: the non-causal backward times the causal forward's gain.
/// `scale` carries the curves to another device: the A100's is Dao's
/// "FlashAttention-2" (arXiv:2307.08691) 73% of peak at long sequences.
KernelRates flashAttention2(double scale) {
  const std::vector<double> keys = {512, 1024, 2048, 4096, 8192, 16384};
  const std::vector<double> forward = {309, 350, 362, 368, 370, 370}, backward = {214, 260, 291, 310, 318, 322},
                            causalForward = {191, 260, 298, 319, 333, 335};
  constexpr double h100Peak = 989;
  KernelRates rates;
  for (size_t i = 0; i < keys.size(); ++i) {
    double f = forward[i] / h100Peak, b = 0.8 * backward[i] / h100Peak, cf = 2 * causalForward[i] / h100Peak;
    rates.attentionForward.push_back({keys[i], scale * f});
    rates.attentionBackward.push_back({keys[i], scale * b});
    rates.causalAttentionForward.push_back({keys[i], scale * cf});
    rates.causalAttentionBackward.push_back({keys[i], scale * b * cf / f});
  }
  return rates;
}

/// The two rates fitted on published runs (bench/calibrate_gpu_presets.py
/// over bench/published_runs.json; per-run errors in docs/cost-model.md):
/// what large GEMMs reach in training (the default curve scaled to that
/// top), and the share of the datasheet memory bandwidth memory-bound
/// kernels reach over their operands' bytes. A fifth or less: frameworks'
/// norms, softmax and elementwise kernels make several passes and keep fp32
/// intermediates, which the op model's bytes (each operand once) leave out.
constexpr double kStreamingFraction = 0.175;

void calibrate(Cluster &c, double gemmPlateau, const char *runs) {
  std::vector<CurvePoint> curve = defaultGemmEfficiency();
  double top = curve.back().value;
  for (CurvePoint &p : curve)
    p.value *= gemmPlateau / top;
  c.gemmEfficiency = curve;
  double bandwidth = kStreamingFraction * c.memoryBandwidth;
  for (KernelKind kind : allKernelKinds())
    c.kernels.streaming[kind] = {{0, bandwidth}, {0, bandwidth / 2}}; // the backward moves about twice
  c.calibration = std::string("datasheet peaks; GEMM plateau ") + std::to_string(gemmPlateau).substr(0, 4) +
                  " and memory-bound kernels at " + std::to_string(kStreamingFraction).substr(0, 5) +
                  " of peak bandwidth, fitted on " + runs +
                  " (docs/cost-model.md); FlashAttention-2's published speeds; run colossal-bench to measure a machine";
}

Cluster nvidiaNode(const std::string &name, int nodes) {
  Cluster c;
  c.name = name;
  c.nodes = nodes;
  c.gpusPerNode = 8;
  c.intraNode.latency = 10e-6;
  c.interNode.latency = 20e-6;
  return c;
}

/// This machine, for host programs: one process per hardware thread, each
/// with its share of the physical memory. The rates are colossal-bench's on
/// a 2-core host, 2 ranks (docs/measurements/host-cluster-2-cores.json:
/// float32 GEMM at 91-100% of 104 GFLOP/s per process from 3.4e7 FLOPs up,
/// 29 GB/s copies, all-reduce bus bandwidth by size over shared memory,
/// falling past 4 MiB); smaller GEMMs and other hosts' links are assumed.
/// A host's own measurement (colossal-bench --device cpu, then --cluster
/// FILE) replaces them.
Cluster hostMachine(int nodes) {
  Cluster c;
  c.name = "host";
  c.nodes = nodes;
  c.gpusPerNode = int(std::max(1u, std::thread::hardware_concurrency()));
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  double physical = pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) : 8 * GB;
  c.description = "this machine: " + std::to_string(c.gpusPerNode) + " hardware threads, " +
                  std::to_string(int64_t(physical / (1 << 20))) + " MiB, one process per thread";
  c.calibration = "a 2-core host's colossal-bench rates; run colossal-bench --device cpu to measure this one";
  // The host computes 16-bit types in float32.
  double peak = 104e9;
  c.peakFlops = {{DType::F32, peak}, {DType::TF32, peak}, {DType::BF16, peak}, {DType::F16, peak}};
  c.gemmEfficiency = {{1e4, 0.05}, {1e5, 0.3}, {1e6, 0.7}, {3.4e7, 0.91}, {2.7e8, 1.0}};
  c.memoryBytes = physical / c.gpusPerNode;
  c.memoryBandwidth = 29 * GB / c.gpusPerNode;
  c.intraNode.latency = 9.8e-6;
  c.intraNode.bandwidth = 2.9 * GB;
  c.intraNode.busBandwidth = {{1024, 0.105 * GB},  {8192, 0.39 * GB},    {65536, 1.46 * GB},
                              {524288, 2.53 * GB}, {4194304, 2.93 * GB}, {33554432, 0.19 * GB}};
  c.interNode.bandwidth = 1.25 * GB; // hosts on 10 Gb/s Ethernet (assumed)
  c.interNode.efficiency = 0.9;
  c.interNode.latency = 50e-6;
  c.hostMemoryBytes = physical;
  c.hostDeviceBandwidth = 29 * GB / c.gpusPerNode; // offload is a host copy
  c.hostMemoryBandwidth = 29 * GB;
  return c;
}

} // namespace

std::vector<std::string> Cluster::presetNames() { return {"dgx-a100", "dgx-h100", "h200-node", "host"}; }

std::optional<Cluster> Cluster::preset(const std::string &name, int nodes) {
  if (nodes < 1)
    return std::nullopt;
  if (name == "host")
    return hostMachine(nodes);
  if (name == "dgx-a100") {
    // NVIDIA A100 datasheet (SXM 80GB); DGX A100 user guide: 8 x 200 Gb/s
    // HDR InfiniBand for compute, PCIe Gen4 hosts, 2 x AMD EPYC 7742.
    Cluster c = nvidiaNode(name, nodes);
    c.description = "DGX A100: 8 x A100-SXM4-80GB, NVLink 3 (600 GB/s bidirectional), "
                    "8 x 200 Gb/s HDR InfiniBand";
    c.peakFlops = {{DType::BF16, 312 * TFLOPS}, {DType::F16, 312 * TFLOPS},
                   {DType::TF32, 156 * TFLOPS}, {DType::F32, 19.5 * TFLOPS}};
    c.memoryBytes = 80 * GB;
    c.memoryBandwidth = 2.039 * TB;
    c.intraNode.bandwidth = 300 * GB; // 600 GB/s bidirectional
    c.intraNode.efficiency = 0.77;    // nccl-tests all-reduce busbw ~230 GB/s
    c.interNode.bandwidth = 25 * GB;  // 200 Gb/s per GPU
    c.interNode.efficiency = 0.9;
    c.hostMemoryBytes = 1024 * GB;
    c.hostDeviceBandwidth = 25 * GB;  // PCIe Gen4 x16, achieved
    c.hostMemoryBandwidth = 400 * GB; // 2 sockets x 8 channels DDR4-3200
    c.kernels = flashAttention2(0.73 / (370.0 / 989));
    calibrate(c, 0.8, "15 published A100 runs");
    return c;
  }
  if (name == "dgx-h100" || name == "h200-node") {
    // NVIDIA H100 and H200 datasheets (SXM); DGX H100 user guide: 8 x 400
    // Gb/s ConnectX-7, PCIe Gen5 hosts, 2 x Xeon 8480C.
    Cluster c = nvidiaNode(name, nodes);
    bool h200 = name == "h200-node";
    c.description = h200 ? "HGX H200: 8 x H200-SXM-141GB, NVLink 4 (900 GB/s bidirectional), "
                           "8 x 400 Gb/s InfiniBand"
                         : "DGX H100: 8 x H100-SXM5-80GB, NVLink 4 (900 GB/s bidirectional), "
                           "8 x 400 Gb/s InfiniBand";
    c.peakFlops = {{DType::BF16, 989 * TFLOPS}, {DType::F16, 989 * TFLOPS},
                   {DType::TF32, 495 * TFLOPS}, {DType::F32, 67 * TFLOPS}};
    c.memoryBytes = h200 ? 141 * GB : 80 * GB;
    c.memoryBandwidth = h200 ? 4.8 * TB : 3.35 * TB;
    c.intraNode.bandwidth = 450 * GB;
    c.intraNode.efficiency = 0.8;
    c.interNode.bandwidth = 50 * GB;
    c.interNode.efficiency = 0.9;
    c.hostMemoryBytes = 2048 * GB;
    c.hostDeviceBandwidth = 50 * GB;  // PCIe Gen5 x16, achieved
    c.hostMemoryBandwidth = 600 * GB; // 2 sockets x 8 channels DDR5-4800
    c.kernels = flashAttention2(1);
    // The H200 computes as the H100 does; its faster memory scales the
    // streaming rate with the datasheet bandwidth.
    calibrate(c, 0.7, "5 published H100 runs");
    return c;
  }
  return std::nullopt;
}

std::string Cluster::measuredHostFile() {
  if (const char *named = std::getenv("COLOSSAL_HOST_CLUSTER"); named && *named)
    return named;
  std::string config;
  if (const char *xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    config = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    config = std::string(home) + "/.config";
  if (config.empty())
    return "";
  std::string file = config + "/colossal/host-cluster.json";
  return std::ifstream(file).good() ? file : "";
}

std::optional<Cluster> Cluster::load(const std::string &nameOrFile, int nodes, std::string &error) {
  // This machine as colossal-bench measured it, when it has been.
  if (std::string measured = nameOrFile == "host" ? measuredHostFile() : ""; !measured.empty()) {
    std::optional<Cluster> cluster = load(measured, nodes, error);
    if (!cluster) {
      error = "the host's measured description " + error;
      return std::nullopt;
    }
    cluster->nodes = nodes;
    return cluster;
  }
  if (std::optional<Cluster> cluster = preset(nameOrFile, nodes))
    return cluster;
  std::ifstream in(nameOrFile);
  if (!in) {
    error = "--cluster '" + nameOrFile + "' is neither a preset nor a readable file";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::optional<Json> json = Json::parse(text.str(), error);
  std::optional<Cluster> cluster = json ? fromJson(*json, error) : std::nullopt;
  if (!cluster)
    error = nameOrFile + ": " + error;
  return cluster;
}

} // namespace colossal::cost
