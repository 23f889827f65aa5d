//===- ColossalBench.cpp - measure this machine, write a cluster description -===//
//
//   mpirun -np N colossal-bench [--mesh dp=2,tp=4] [--device cpu|cuda] [--quick]
//                               [--name NAME] [--fallback PRESET] [-o cluster.json]
//
// Measures what the cost model needs, on the machine it runs on:
//   - GEMM rate by problem size (fp32 on the host; fp32, bf16, f16 on a GPU),
//   - on the host, its kernels as emitted programs call them (HostKernels.h):
//     GEMM by shape, attention, memory-bound kinds, the optimizer, and how
//     much faster a rank runs when the others are idle,
//   - each collective's time by message size on every mesh axis, reported
//     as nccl-tests do: algorithm bandwidth S / t and bus bandwidth
//     busbw = algbw * factor(n), the factor the cost model uses; an axis
//     whose ranks share a node measures the intra-node link, one whose ranks
//     span nodes the inter-node link,
//   - device and host memory bandwidth, and the host-device link (pinned
//     copies on a GPU; on the host target offload is a host copy).
// Rank 0 prints a short table and writes a colossal-cluster/1 description:
// peaks are the best measured rates, efficiency curves are measured rates
// over them, link latency is the smallest all-reduce time. A link no axis
// exercised is written as "unmeasured" (readers take the --fallback
// preset's, default h200-node), and the description lists what was
// measured. `colossal-cost --cluster FILE` reads it back. Times are medians
// over repetitions; each repetition's time is the slowest rank's.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"
#include "Timing.h"
#include "colossal/cost/Cluster.h"
#include "colossal/cost/Communication.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"
#include "colossal/runtime/kernels/Kernels.h"
#ifdef COLOSSAL_WITH_CUDA
#include "colossal/runtime/comm/NcclCommunicator.h"
#include "colossal/runtime/kernels/CudaDevice.h"
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

using namespace colossal;
using bench::timed;
using rt::Buffer;
using rt::Communicator;

namespace {

struct Options {
  std::string mesh, device = "cpu", name = "measured", output = "cluster.json", fallback = "h200-node";
  bool quick = false;
};

/// Bytes of memory on this host (MemTotal).
double hostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:")
      return kb * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

struct CollectivePoint {
  std::string axis, collective;
  int ranks;
  double bytes, seconds, busBandwidth;
  bool crossesNodes;
};

/// Whether a group's ranks sit on more than one node (ranks are placed on
/// nodes in blocks of `perNode`, as mpirun's default mapping does).
bool spansNodes(const std::vector<int> &worldRanks, int perNode) {
  for (int r : worldRanks)
    if (r / perNode != worldRanks.front() / perNode)
      return true;
  return false;
}

/// A link from the all-reduce points measured on it; nullopt when none.
std::optional<cost::Link> linkOf(const std::vector<CollectivePoint> &points, bool crossesNodes) {
  cost::Link link;
  link.latency = 1e9;
  for (const CollectivePoint &p : points)
    if (p.collective == "all_reduce" && p.crossesNodes == crossesNodes) {
      link.busBandwidth.push_back({p.bytes, p.busBandwidth});
      link.bandwidth = std::max(link.bandwidth, p.busBandwidth);
      link.latency = std::min(link.latency, p.seconds);
    }
  if (link.busBandwidth.empty())
    return std::nullopt;
  std::sort(link.busBandwidth.begin(), link.busBandwidth.end(),
            [](const cost::CurvePoint &a, const cost::CurvePoint &b) { return a.size < b.size; });
  return link;
}

/// Where the benchmark's buffers live and how its kernels finish: host
/// memory, or (--device cuda) the rank's GPU and a stream.
struct Device {
  bool gpu = false;
  rt::Stream stream;
  std::function<void()> sync = [] {};
  std::function<void *(int64_t)> allocate = [](int64_t bytes) { return std::calloc(size_t(bytes), 1); };
  std::function<void(void *)> release = [](void *p) { std::free(p); };
  std::string name = "host CPU";
  double memoryBytes = 0;
  /// The element types measured (fp32; on a GPU bf16 and f16 too).
  std::vector<std::pair<rt::DType, cost::DType>> types = {{rt::DType::F32, cost::DType::F32}};
};

/// Reads the command line into `options`; the exit status when the program
/// should stop (0 after --help's usage, 2 on a bad argument).
std::optional<int> parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "colossal-bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--mesh")
      options.mesh = value();
    else if (arg == "--device")
      options.device = value();
    else if (arg == "--name")
      options.name = value();
    else if (arg == "-o" || arg == "--output")
      options.output = value();
    else if (arg == "--fallback")
      options.fallback = value();
    else if (arg == "--quick")
      options.quick = true;
    else if (arg == "--help" || arg == "-h") {
      std::printf("usage: mpirun -np N colossal-bench [--mesh dp=2,tp=4] [--device cpu|cuda] [--quick]\n"
                  "                                   [--name NAME] [--fallback PRESET] [-o cluster.json]\n"
                  "Measures GEMM rates, collective bandwidth per mesh axis and memory bandwidth, and writes\n"
                  "a colossal-cluster/1 description for colossal-cost --cluster (default cluster.json).\n"
                  "A link no mesh axis exercises is written as unmeasured; readers take the --fallback\n"
                  "preset's value (default h200-node).\n");
      return 0;
    } else {
      std::fprintf(stderr, "colossal-bench: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

struct GemmPoint {
  std::string dtype;
  int64_t size;
  double flops, rate;
};

/// Square GEMM rates by size and element type.
std::vector<GemmPoint> measureGemms(rt::Communicator &world, const Device &device, const Options &options,
                                    int repeats) {
  std::vector<GemmPoint> gemms;
  std::vector<int64_t> sizes =
      options.quick ? std::vector<int64_t>{128, 256, 512} : std::vector<int64_t>{256, 512, 1024, 2048};
  if (device.gpu && !options.quick)
    sizes.push_back(4096), sizes.push_back(8192);
  for (const auto &type : device.types)
    for (int64_t n : sizes) {
      rt::DType dtype = type.first;
      int64_t bytes = n * n * rt::bytesOf(dtype);
      void *a = device.allocate(bytes), *b = device.allocate(bytes), *c = device.allocate(bytes);
      rt::GemmShape g;
      g.m = g.n = g.k = n;
      double seconds = timed(
          world, repeats,
          [&] {
#ifdef COLOSSAL_WITH_CUDA
            if (device.gpu) {
              rt::cuda::gemm(device.stream, g, dtype, a, b, c, 1, 0);
              return;
            }
#endif
            rt::cpu::gemm(device.stream, g, dtype, a, b, c, 1, 0);
          },
          device.sync);
      device.release(a), device.release(b), device.release(c);
      double flops = 2.0 * double(n) * n * n;
      gemms.push_back({rt::nameOf(dtype), n, flops, flops / seconds});
    }
  return gemms;
}

struct Bandwidths {
  double memory = 0, hostMemory = 0, hostDevice = 0;
};

/// Memory bandwidth (a large copy, read + write), host memory's (the host
/// optimizer's) and the host-device link (offload): on a GPU pinned copies
/// each way, on the host target a host copy, which is what offload does
/// there.
Bandwidths measureBandwidths(rt::Communicator &world, const Device &device, const Options &options, int repeats) {
  Bandwidths result;
  int64_t copyBytes = options.quick ? (64 << 20) : (256 << 20);
  void *src = device.allocate(copyBytes), *dst = device.allocate(copyBytes);
  double copySeconds = timed(
      world, repeats,
      [&] {
#ifdef COLOSSAL_WITH_CUDA
        if (device.gpu) {
          cudaMemcpyAsync(dst, src, size_t(copyBytes), cudaMemcpyDeviceToDevice,
                          static_cast<cudaStream_t>(device.stream.handle));
          return;
        }
#endif
        std::memcpy(dst, src, size_t(copyBytes));
      },
      device.sync);
  device.release(src), device.release(dst);
  result.memory = 2.0 * double(copyBytes) / copySeconds;
  std::vector<char> hostSrc(size_t(copyBytes), 1), hostDst(size_t(copyBytes), 0);
  double hostCopySeconds = timed(
      world, repeats, [&] { std::memcpy(hostDst.data(), hostSrc.data(), size_t(copyBytes)); }, [] {});
  result.hostMemory = 2.0 * double(copyBytes) / hostCopySeconds;
  result.hostDevice = double(copyBytes) / hostCopySeconds;
#ifdef COLOSSAL_WITH_CUDA
  if (device.gpu) {
    void *pinned = nullptr, *on = device.allocate(copyBytes);
    if (cudaHostAlloc(&pinned, size_t(copyBytes), cudaHostAllocDefault) != cudaSuccess)
      rt::fail("cudaHostAlloc", "cannot pin " + std::to_string(copyBytes) + " bytes for the host-device copy");
    auto st = static_cast<cudaStream_t>(device.stream.handle);
    double down = timed(
        world, repeats, [&] { cudaMemcpyAsync(pinned, on, size_t(copyBytes), cudaMemcpyDeviceToHost, st); },
        device.sync);
    double up = timed(
        world, repeats, [&] { cudaMemcpyAsync(on, pinned, size_t(copyBytes), cudaMemcpyHostToDevice, st); },
        device.sync);
    result.hostDevice = double(copyBytes) / std::max(down, up);
    cudaFreeHost(pinned);
    device.release(on);
  }
#endif
  return result;
}

/// Every collective by message size on every mesh axis of more than one
/// rank. Two passes over every axis, size and collective, each point the
/// faster of its two medians: a slow spell of a shared machine (seconds
/// long) lands on one pass, not on a point's every repeat.
std::vector<CollectivePoint> measureCollectives(rt::Communicator &world, rt::ProcessGroups &groups,
                                                const rt::MeshShape &mesh, const Device &device, const Options &options,
                                                int repeats, int perNode) {
  std::vector<CollectivePoint> points;
  std::vector<int64_t> messageBytes;
  // Every doubling from 512 KiB up: shared-memory transports fall off a
  // cliff between sizes a coarser ladder would skip.
  for (int64_t b = 1 << 10;
       b <= (options.quick ? (int64_t(1) << 22) : (device.gpu ? int64_t(1) << 28 : int64_t(1) << 25));
       b *= (options.quick             ? 16
             : b >= (int64_t(1) << 19) ? 2
                                       : 8))
    messageBytes.push_back(b);
  size_t point = 0;
  for (int pass = 0; pass < (options.quick ? 1 : 2); ++pass, point = 0) {
    for (size_t axis = 0; axis < mesh.axes().size(); ++axis) {
      Communicator &comm = groups.axis(int(axis));
      int n = comm.size();
      if (n < 2)
        continue;
      for (int64_t bytes : messageBytes) {
        int64_t count = bytes / 4 / n * n; // divisible for scatter/gather
        void *send = device.allocate(count * 4), *recv = device.allocate(count * 4);
        struct Case {
          const char *name;
          cost::Collective kind;
          std::function<void()> run;
        };
        std::vector<Case> cases = {
            {"all_reduce", cost::Collective::AllReduce,
             [&] { comm.allReduce(Buffer::of(send, rt::DType::F32, count)); }},
            {"all_gather", cost::Collective::AllGather,
             [&] {
               comm.allGather(Buffer::of(send, rt::DType::F32, count / n), Buffer::of(recv, rt::DType::F32, count));
             }},
            {"reduce_scatter", cost::Collective::ReduceScatter,
             [&] {
               comm.reduceScatter(Buffer::of(send, rt::DType::F32, count), Buffer::of(recv, rt::DType::F32, count / n));
             }},
            {"all_to_all", cost::Collective::AllToAll,
             [&] { comm.allToAll(Buffer::of(send, rt::DType::F32, count), Buffer::of(recv, rt::DType::F32, count)); }},
            {"broadcast", cost::Collective::Broadcast,
             [&] { comm.broadcast(Buffer::of(send, rt::DType::F32, count), 0); }},
        };
        bool crosses = spansNodes(comm.worldRanks(), perNode);
        for (Case &c : cases) {
          double seconds = timed(world, repeats, c.run, [] {});
          double size = double(count) * 4;
          if (pass > 0 && point < points.size())
            seconds = std::min(seconds, points[point].seconds);
          CollectivePoint measured{
              mesh.axes()[axis].name, c.name, n, size, seconds, size / seconds * cost::busFactor(c.kind, n), crosses};
          if (pass == 0)
            points.push_back(measured);
          else
            points[point] = measured;
          ++point;
        }
        device.release(send), device.release(recv);
      }
    }
  }
  return points;
}

/// What was measured, as a colossal-cluster/1 description: peaks the best
/// rates, efficiency curves the rates over them, each link from the axes
/// that exercised it (one no axis exercised left to the fallback preset,
/// and said so).
struct Measured {
  std::vector<GemmPoint> gemms;
  std::optional<bench::HostKernelMeasurements> hostKernels;
  double hostOptimizer = 0;
  Bandwidths bandwidths;
  std::vector<CollectivePoint> points;
};

cost::Cluster describe(const Measured &m, const Device &device, const Options &options, int worldSize, int perNode,
                       const std::string &meshText) {
  cost::Cluster cluster;
  cluster.name = options.name;
  cluster.gpusPerNode = perNode;
  cluster.nodes = std::max(1, worldSize / perNode);
  cluster.description = std::string("measured by colossal-bench on ") + device.name + ", " + std::to_string(worldSize) +
                        " ranks, mesh " + meshText;
  cluster.calibration = "colossal-bench" + std::string(options.quick ? " --quick" : "");
  cluster.measured = {"peak_flops", "gemm_efficiency", "memory_bandwidth_bytes_per_s",
                      "host_memory_bandwidth_bytes_per_s", "host_device_bandwidth_bytes_per_s"};
  for (auto [dtype, costType] : device.types) {
    double best = 0;
    for (const GemmPoint &p : m.gemms)
      if (p.dtype == rt::nameOf(dtype))
        best = std::max(best, p.rate);
    if (dtype == rt::DType::F32 && m.hostKernels)
      best = std::max(best, m.hostKernels->bestGemmRate());
    cluster.peakFlops[costType] = best;
    if (dtype == rt::DType::F32 && device.gpu)
      cluster.peakFlops[cost::DType::TF32] = best;
  }
  double fp32Peak = cluster.peakFlops[cost::DType::F32];
  for (const GemmPoint &p : m.gemms)
    if (p.dtype == "f32")
      cluster.gemmEfficiency.push_back({p.flops, p.rate / fp32Peak});
  if (m.hostKernels) {
    cluster.kernels = m.hostKernels->rates(fp32Peak);
    cluster.measured.push_back("kernels");
  } else {
    // A GPU node's offloaded optimizer runs on its host's cores.
    cluster.kernels.hostOptimizerBytesPerSecond = m.hostOptimizer;
    cluster.measured.push_back("kernels.host_optimizer_bytes_per_s");
  }
  cluster.memoryBytes = device.memoryBytes;
  cluster.memoryBandwidth = m.bandwidths.memory;
  cluster.hostMemoryBytes = hostMemoryBytes();
  cluster.hostMemoryBandwidth = m.bandwidths.hostMemory;
  cluster.hostDeviceBandwidth = m.bandwidths.hostDevice;
  cost::Cluster fallback = *cost::Cluster::preset(options.fallback);
  cluster.fallbackPreset = options.fallback;
  for (bool crosses : {false, true}) {
    std::optional<cost::Link> link = linkOf(m.points, crosses);
    const char *field = crosses ? "inter_node" : "intra_node";
    (crosses ? cluster.interNode : cluster.intraNode) =
        link ? *link : (crosses ? fallback.interNode : fallback.intraNode);
    (link ? cluster.measured : cluster.unmeasured).push_back(field);
  }
  return cluster;
}

/// Rank 0's short table: GEMM rates, memory bandwidth, and each collective
/// at the smallest and largest message.
void printSummary(const Measured &m, const Device &device, int worldSize, const std::string &meshText) {
  std::printf("colossal-bench: %s, %d ranks, mesh %s\n\n", device.name.c_str(), worldSize, meshText.c_str());
  std::printf("%-6s %8s %14s\n", "gemm", "n", "GFLOP/s");
  for (const GemmPoint &p : m.gemms)
    std::printf("%-6s %8lld %14.1f\n", p.dtype.c_str(), (long long)p.size, p.rate / 1e9);
  std::printf("\nmemory bandwidth (copy): %.1f GB/s\n", m.bandwidths.memory / 1e9);
  if (m.points.empty())
    return;
  std::printf("\n%-6s %-15s %6s %12s %12s %12s\n", "axis", "collective", "ranks", "bytes", "time us", "busbw GB/s");
  for (const CollectivePoint &p : m.points)
    if (p.bytes == m.points.back().bytes || p.bytes == m.points.front().bytes)
      std::printf("%-6s %-15s %6d %12.0f %12.1f %12.2f\n", p.axis.c_str(), p.collective.c_str(), p.ranks, p.bytes,
                  p.seconds * 1e6, p.busBandwidth / 1e9);
}

} // namespace

int main(int argc, char **argv) {
  rt::MpiSession mpi(&argc, &argv);
  Options options;
  if (std::optional<int> status = parseOptions(argc, argv, options))
    return *status;
  return rt::runOrAbort(
      [&]() -> int {
        auto mpiWorld = rt::MpiCommunicator::world(nullptr);
        Device device;
        device.gpu = options.device == "cuda";
#ifndef COLOSSAL_WITH_CUDA
        if (device.gpu)
          rt::fail("colossal-bench", "built without CUDA: use --device cpu, or build with -DCOLOSSAL_CUDA=ON");
#endif
        if (!device.gpu && options.device != "cpu")
          rt::fail("colossal-bench", "--device is cpu or cuda, not \"" + options.device + "\"");
        if (!cost::Cluster::preset(options.fallback))
          rt::fail("--fallback", "no preset \"" + options.fallback + "\" (dgx-a100, dgx-h100, h200-node)");
        rt::MeshShape mesh =
            options.mesh.empty() ? rt::MeshShape({{"world", mpiWorld->size()}}) : rt::MeshShape::parse(options.mesh);
        int perNode = std::max(1, mpi.launch().localSize);
        device.memoryBytes = hostMemoryBytes() / perNode;
        std::unique_ptr<rt::ProcessGroups> groups;
#ifdef COLOSSAL_WITH_CUDA
        std::unique_ptr<rt::NcclCommunicator> ncclWorld;
        if (device.gpu) {
          rt::NcclSetup setup = rt::NcclSetup::create(*mpiWorld, mpi.launch().localRank, nullptr);
          ncclWorld = std::move(setup.world);
          groups = std::make_unique<rt::ProcessGroups>(rt::NcclSetup::groups(mesh, *ncclWorld, nullptr));
          device.stream = rt::cuda::createStream();
          device.sync = [&device] { rt::cuda::synchronize(device.stream); };
          device.allocate = [](int64_t bytes) {
            void *p = nullptr;
            cudaMalloc(&p, size_t(bytes));
            cudaMemset(p, 0, size_t(bytes));
            return p;
          };
          device.release = [](void *p) { cudaFree(p); };
          rt::cuda::DeviceInfo info = rt::cuda::initializeCudaDevice(mpi.launch().localRank);
          device.name = info.name;
          device.memoryBytes = double(info.memoryBytes);
          device.types.push_back({rt::DType::BF16, cost::DType::BF16});
          device.types.push_back({rt::DType::F16, cost::DType::F16});
        }
#endif
        if (!groups)
          groups = std::make_unique<rt::ProcessGroups>(rt::ProcessGroups::overMpi(mesh, *mpiWorld));
        int repeats = options.quick ? 3 : 10;

        Measured m;
        m.gemms = measureGemms(*mpiWorld, device, options, repeats);
        // The host's kernels as emitted programs call them.
        if (!device.gpu)
          m.hostKernels = bench::measureHostKernels(*mpiWorld, options.quick);
        m.hostOptimizer = device.gpu ? bench::measureHostOptimizer(*mpiWorld, options.quick) : 0;
        m.bandwidths = measureBandwidths(*mpiWorld, device, options, repeats);
        m.points = measureCollectives(*mpiWorld, *groups, mesh, device, options, repeats, perNode);
        if (mpiWorld->rank() != 0)
          return 0;
        cost::Cluster cluster = describe(m, device, options, mpiWorld->size(), perNode, mesh.str());
        printSummary(m, device, mpiWorld->size(), mesh.str());
        std::string json = cluster.toJson().dump(2) + "\n";
        std::ofstream out(options.output);
        out << json;
        if (!out)
          rt::fail("colossal-bench", "cannot write " + options.output);
        std::printf("\n%s\nwrote %s (colossal-cluster/1)\n", cluster.provenance().c_str(), options.output.c_str());
        return 0;
      },
      [] { rt::MpiSession::abort(1); });
}
