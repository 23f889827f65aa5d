//===- CommConformance.cpp - one suite every communication backend passes -===//
//
// Run under a launcher with any number of ranks:
//
//   mpirun -np 4 comm-conformance [--mesh dp=2,tp=2] [--backend mpi|nccl]
//
// For the world and every axis group of the mesh it checks each collective
// (sum and max reductions, gathers, scatters, all-to-all, broadcast, reduce, ring
// send/recv, barrier) on every element type, on contiguous and strided
// buffers, and the trainer's bucketed gradient average (MPI), with element
// counts that do not divide evenly into anything
// (0, 1, 7, 1031), and checks the byte counters after every call. Values are
// small integers, exact in every type, so results compare bit for bit. After
// each case the ranks agree on a verdict, so one rank's failure is reported
// by rank 0 and never desynchronises the rest. Exit status 0 only when every
// case passed on every rank.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/train/GradientBuckets.h"
#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"

#ifdef COLOSSAL_WITH_NCCL
#include "colossal/runtime/comm/NcclCommunicator.h"
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using namespace colossal::rt;

namespace {

/// A small integer that depends on (rank, block, element): exact in bf16 and
/// f16 even after summing over eight ranks.
double valueAt(int rank, int block, int64_t i) { return double((rank + 1) * ((i + block) % 5 + 1)); }

/// Host storage of `count` elements of `dtype`, written from doubles.
struct Host {
  DType dtype;
  std::vector<unsigned char> bytes;
  Host(DType dtype, int64_t count) : dtype(dtype), bytes(size_t(count * bytesOf(dtype)) + 1, 0xAB) {}
  void *data() { return bytes.data(); }
  void set(int64_t i, double v) {
    unsigned char *p = bytes.data() + i * bytesOf(dtype);
    switch (dtype) {
    case DType::F32: { float f = float(v); std::memcpy(p, &f, 4); break; }
    case DType::F64: std::memcpy(p, &v, 8); break;
    case DType::BF16: { uint16_t h = floatToBf16(float(v)); std::memcpy(p, &h, 2); break; }
    case DType::F16: { uint16_t h = floatToF16(float(v)); std::memcpy(p, &h, 2); break; }
    case DType::I64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
    case DType::I32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
    case DType::U16: { uint16_t x = uint16_t(v); std::memcpy(p, &x, 2); break; }
    case DType::U8: *p = uint8_t(v); break;
    }
  }
  double get(int64_t i) const {
    const unsigned char *p = bytes.data() + i * bytesOf(dtype);
    switch (dtype) {
    case DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::F64: { double d; std::memcpy(&d, p, 8); return d; }
    case DType::BF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16ToFloat(h); }
    case DType::F16: { uint16_t h; std::memcpy(&h, p, 2); return f16ToFloat(h); }
    case DType::I64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
    case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::U16: { uint16_t x; std::memcpy(&x, p, 2); return x; }
    case DType::U8: return *p;
    }
    return 0;
  }
};

/// Moves host data to where the backend wants it (the device for NCCL).
struct Placement {
  std::function<void *(int64_t)> allocate;
  std::function<void(void *)> release;
  std::function<void(void *, const void *, int64_t)> toBackend;
  std::function<void(void *, const void *, int64_t)> toHost;
};

Placement hostPlacement() {
  return {[](int64_t bytes) { return std::malloc(size_t(bytes + 1)); }, [](void *p) { std::free(p); },
          [](void *d, const void *s, int64_t n) { std::memcpy(d, s, size_t(n)); },
          [](void *d, const void *s, int64_t n) { std::memcpy(d, s, size_t(n)); }};
}

class Suite {
public:
  Suite(Communicator &world, Placement placement) : world_(world), place_(std::move(placement)) {}

  /// Runs `body` (which returns a failure description or ""), then agrees
  /// with every rank on the verdict.
  void run(const std::string &name, const std::function<std::string()> &body) {
    std::string failure;
    try {
      failure = body();
    } catch (const std::exception &e) {
      failure = std::string("threw: ") + e.what();
    }
    int64_t failed = failure.empty() ? 0 : 1;
    world_.allReduce(Buffer::of(&failed, DType::I64, 1));
    ++cases_;
    if (!failure.empty())
      std::fprintf(stderr, "FAIL rank %d: %s: %s\n", world_.rank(), name.c_str(), failure.c_str());
    if (failed) {
      ++failures_;
      if (world_.rank() == 0)
        std::printf("FAIL %s (%lld ranks)\n", name.c_str(), (long long)failed);
    }
  }

  // A backend buffer filled from host values, read back on demand.
  struct Remote {
    Suite &suite;
    Host host;
    void *data;
    Remote(Suite &s, DType dtype, int64_t count) : suite(s), host(dtype, count) {
      data = s.place_.allocate(int64_t(host.bytes.size()));
      s.place_.toBackend(data, host.data(), int64_t(host.bytes.size()));
    }
    ~Remote() { suite.place_.release(data); }
    void upload() { suite.place_.toBackend(data, host.data(), int64_t(host.bytes.size())); }
    Host &download() {
      suite.place_.toHost(host.data(), data, int64_t(host.bytes.size()));
      return host;
    }
  };

  int cases() const { return cases_; }
  int failures() const { return failures_; }

private:
  Communicator &world_;
  Placement place_;
  int cases_ = 0;
  int failures_ = 0;
};

std::string mismatch(const char *what, int64_t i, double got, double want) {
  char text[160];
  std::snprintf(text, sizeof text, "%s element %lld is %g, expected %g", what, (long long)i, got, want);
  return text;
}

std::string checkBytes(CommCounters &counters, const char *kind, const std::string &axis,
                       int64_t before, int64_t expected) {
  auto snapshot = counters.snapshot();
  int64_t now = snapshot[{kind, axis}].bytes;
  if (now - before != expected)
    return std::string(kind) + " counted " + std::to_string(now - before) + " bytes, expected " +
           std::to_string(expected);
  return "";
}

int64_t bytesSoFar(CommCounters &counters, const char *kind, const std::string &axis) {
  auto snapshot = counters.snapshot();
  return snapshot[{kind, axis}].bytes;
}

void runSuite(Suite &suite, Communicator &comm, CommCounters &counters, bool allTypes) {
  const std::string axis = comm.axis();
  const int n = comm.size(), r = comm.rank();
  std::vector<DType> types = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::F64};
  if (!allTypes)
    types = {DType::F32, DType::BF16};
  for (DType dtype : types) {
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t(1031)}) {
      std::string tag = std::string(nameOf(dtype)) + " x" + std::to_string(count) + " on " + axis +
                        " (" + std::to_string(n) + " ranks)";

      suite.run("all_reduce sum " + tag, [&]() -> std::string {
        Suite::Remote buf(suite, dtype, count);
        for (int64_t i = 0; i < count; ++i)
          buf.host.set(i, valueAt(r, 0, i));
        buf.upload();
        int64_t before = bytesSoFar(counters, "all_reduce", axis);
        comm.allReduce(Buffer::of(buf.data, dtype, count), ReduceOp::Sum);
        Host &out = buf.download();
        for (int64_t i = 0; i < count; ++i) {
          double want = 0;
          for (int k = 0; k < n; ++k)
            want += valueAt(k, 0, i);
          if (out.get(i) != want)
            return mismatch("sum", i, out.get(i), want);
        }
        return checkBytes(counters, "all_reduce", axis, before, count * bytesOf(dtype));
      });

      suite.run("all_reduce max " + tag, [&]() -> std::string {
        Suite::Remote buf(suite, dtype, count);
        for (int64_t i = 0; i < count; ++i)
          buf.host.set(i, valueAt((r + int(i)) % n, 1, i));
        buf.upload();
        comm.allReduce(Buffer::of(buf.data, dtype, count), ReduceOp::Max);
        Host &out = buf.download();
        for (int64_t i = 0; i < count; ++i) {
          double want = 0;
          for (int k = 0; k < n; ++k)
            want = std::max(want, valueAt((k + int(i)) % n, 1, i));
          if (out.get(i) != want)
            return mismatch("max", i, out.get(i), want);
        }
        return "";
      });

      suite.run("all_gather " + tag, [&]() -> std::string {
        Suite::Remote send(suite, dtype, count), recv(suite, dtype, count * n);
        for (int64_t i = 0; i < count; ++i)
          send.host.set(i, valueAt(r, 2, i));
        send.upload();
        int64_t before = bytesSoFar(counters, "all_gather", axis);
        comm.allGather(Buffer::of(send.data, dtype, count), Buffer::of(recv.data, dtype, count * n));
        Host &out = recv.download();
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < count; ++i)
            if (out.get(k * count + i) != valueAt(k, 2, i))
              return mismatch("gathered", k * count + i, out.get(k * count + i), valueAt(k, 2, i));
        return checkBytes(counters, "all_gather", axis, before, count * n * bytesOf(dtype));
      });

      suite.run("reduce_scatter " + tag, [&]() -> std::string {
        Suite::Remote send(suite, dtype, count * n), recv(suite, dtype, count);
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < count; ++i)
            send.host.set(k * count + i, valueAt(r, k, i));
        send.upload();
        int64_t before = bytesSoFar(counters, "reduce_scatter", axis);
        comm.reduceScatter(Buffer::of(send.data, dtype, count * n), Buffer::of(recv.data, dtype, count));
        Host &out = recv.download();
        for (int64_t i = 0; i < count; ++i) {
          double want = 0;
          for (int k = 0; k < n; ++k)
            want += valueAt(k, r, i);
          if (out.get(i) != want)
            return mismatch("scattered sum", i, out.get(i), want);
        }
        return checkBytes(counters, "reduce_scatter", axis, before, count * n * bytesOf(dtype));
      });

      suite.run("all_to_all " + tag, [&]() -> std::string {
        Suite::Remote send(suite, dtype, count * n), recv(suite, dtype, count * n);
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < count; ++i)
            send.host.set(k * count + i, valueAt(r, k, i) + k);
        send.upload();
        comm.allToAll(Buffer::of(send.data, dtype, count * n), Buffer::of(recv.data, dtype, count * n));
        Host &out = recv.download();
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < count; ++i) {
            double want = valueAt(k, r, i) + r;
            if (out.get(k * count + i) != want)
              return mismatch("exchanged", k * count + i, out.get(k * count + i), want);
          }
        return "";
      });

      suite.run("broadcast " + tag, [&]() -> std::string {
        Suite::Remote buf(suite, dtype, count);
        int root = n - 1;
        for (int64_t i = 0; i < count; ++i)
          buf.host.set(i, r == root ? valueAt(root, 3, i) : 0);
        buf.upload();
        comm.broadcast(Buffer::of(buf.data, dtype, count), root);
        Host &out = buf.download();
        for (int64_t i = 0; i < count; ++i)
          if (out.get(i) != valueAt(root, 3, i))
            return mismatch("broadcast", i, out.get(i), valueAt(root, 3, i));
        return "";
      });

      // Reduced into one rank's buffer (each root in turn for the sum); the
      // others' buffers are only read.
      for (int root = 0; root < n; ++root)
        suite.run("reduce sum to " + std::to_string(root) + " " + tag, [&]() -> std::string {
          Suite::Remote buf(suite, dtype, count);
          for (int64_t i = 0; i < count; ++i)
            buf.host.set(i, valueAt(r, 0, i));
          buf.upload();
          int64_t before = bytesSoFar(counters, "reduce", axis);
          comm.reduce(Buffer::of(buf.data, dtype, count), root, ReduceOp::Sum);
          Host &out = buf.download();
          for (int64_t i = 0; i < count; ++i) {
            double want = valueAt(r, 0, i);
            if (r == root) {
              want = 0;
              for (int k = 0; k < n; ++k)
                want += valueAt(k, 0, i);
            }
            if (out.get(i) != want)
              return mismatch(r == root ? "reduced" : "non-root buffer", i, out.get(i), want);
          }
          return checkBytes(counters, "reduce", axis, before, count * bytesOf(dtype));
        });

      suite.run("reduce max " + tag, [&]() -> std::string {
        Suite::Remote buf(suite, dtype, count);
        for (int64_t i = 0; i < count; ++i)
          buf.host.set(i, valueAt((r + int(i)) % n, 1, i));
        buf.upload();
        comm.reduce(Buffer::of(buf.data, dtype, count), 0, ReduceOp::Max);
        Host &out = buf.download();
        for (int64_t i = 0; i < count; ++i) {
          double want = valueAt((r + int(i)) % n, 1, i);
          if (r == 0) {
            want = 0;
            for (int k = 0; k < n; ++k)
              want = std::max(want, valueAt((k + int(i)) % n, 1, i));
          }
          if (out.get(i) != want)
            return mismatch("max", i, out.get(i), want);
        }
        return "";
      });

      suite.run("send_recv ring " + tag, [&]() -> std::string {
        Suite::Remote send(suite, dtype, count), recv(suite, dtype, count);
        for (int64_t i = 0; i < count; ++i)
          send.host.set(i, valueAt(r, 4, i));
        send.upload();
        int next = (r + 1) % n, previous = (r + n - 1) % n;
        comm.sendRecv({{PeerTransfer::Send, next, Buffer::of(send.data, dtype, count)},
                       {PeerTransfer::Recv, previous, Buffer::of(recv.data, dtype, count)}});
        Host &out = recv.download();
        for (int64_t i = 0; i < count; ++i)
          if (out.get(i) != valueAt(previous, 4, i))
            return mismatch("received", i, out.get(i), valueAt(previous, 4, i));
        return "";
      });
    }

    // Strided: a column block (3 of every 5 elements) of a 9 x 5 matrix.
    const int64_t rows = 9, block = 3, stride = 5, count = rows * block;
    std::string tag = std::string(nameOf(dtype)) + " strided " + std::to_string(rows) + "x" +
                      std::to_string(block) + "/" + std::to_string(stride) + " on " + axis;

    suite.run("all_reduce sum " + tag, [&]() -> std::string {
      Suite::Remote buf(suite, dtype, rows * stride);
      for (int64_t i = 0; i < rows * stride; ++i)
        buf.host.set(i, valueAt(r, 5, i));
      buf.upload();
      int64_t before = bytesSoFar(counters, "all_reduce", axis);
      comm.allReduce(Buffer::strided(buf.data, dtype, count, block, stride));
      Host &out = buf.download();
      for (int64_t i = 0; i < rows * stride; ++i) {
        double want = valueAt(r, 5, i);
        if (i % stride < block) {
          want = 0;
          for (int k = 0; k < n; ++k)
            want += valueAt(k, 5, i);
        }
        if (out.get(i) != want)
          return mismatch(i % stride < block ? "strided sum" : "untouched gap", i, out.get(i), want);
      }
      return checkBytes(counters, "all_reduce", axis, before, count * bytesOf(dtype));
    });

    suite.run("all_gather into strided " + tag, [&]() -> std::string {
      // Each rank sends 3 elements; the gathered 3n land in blocks of 3, 5 apart.
      Suite::Remote send(suite, dtype, block), recv(suite, dtype, int64_t(n) * stride);
      for (int64_t i = 0; i < block; ++i)
        send.host.set(i, valueAt(r, 6, i));
      for (int64_t i = 0; i < int64_t(n) * stride; ++i)
        recv.host.set(i, 99);
      send.upload();
      recv.upload();
      comm.allGather(Buffer::of(send.data, dtype, block),
                     Buffer::strided(recv.data, dtype, block * n, block, stride));
      Host &out = recv.download();
      for (int k = 0; k < n; ++k)
        for (int64_t i = 0; i < stride; ++i) {
          double want = i < block ? valueAt(k, 6, i) : 99;
          if (out.get(k * stride + i) != want)
            return mismatch("strided gather", k * stride + i, out.get(k * stride + i), want);
        }
      return "";
    });

    suite.run("broadcast strided " + tag, [&]() -> std::string {
      Suite::Remote buf(suite, dtype, rows * stride);
      for (int64_t i = 0; i < rows * stride; ++i)
        buf.host.set(i, valueAt(r, 7, i));
      buf.upload();
      comm.broadcast(Buffer::strided(buf.data, dtype, count, block, stride), 0);
      Host &out = buf.download();
      for (int64_t i = 0; i < rows * stride; ++i) {
        double want = i % stride < block ? valueAt(0, 7, i) : valueAt(r, 7, i);
        if (out.get(i) != want)
          return mismatch("strided broadcast", i, out.get(i), want);
      }
      return "";
    });
  }

  // A strided block reduced: the root's other elements stay as they were.
  {
    const int64_t rows = 4, block = 2, stride = 3, count = rows * block;
    suite.run("reduce strided on " + axis, [&]() -> std::string {
      Suite::Remote buf(suite, DType::F32, rows * stride);
      for (int64_t i = 0; i < rows * stride; ++i)
        buf.host.set(i, valueAt(r, 9, i));
      buf.upload();
      comm.reduce(Buffer::strided(buf.data, DType::F32, count, block, stride), n - 1);
      Host &out = buf.download();
      for (int64_t i = 0; i < rows * stride; ++i) {
        double want = valueAt(r, 9, i);
        if (r == n - 1 && i % stride < block) {
          want = 0;
          for (int k = 0; k < n; ++k)
            want += valueAt(k, 9, i);
        }
        if (out.get(i) != want)
          return mismatch("strided reduce", i, out.get(i), want);
      }
      return "";
    });
  }

  suite.run("barrier on " + axis, [&]() -> std::string {
    comm.barrier();
    return "";
  });

  suite.run("size checks on " + axis, [&]() -> std::string {
    std::vector<float> a(4), b(4);
    try {
      comm.allGather(Buffer::of(a.data(), DType::F32, 4), Buffer::of(b.data(), DType::F32, 4 * n + 1));
    } catch (const Error &e) {
      if (std::string(e.what()).find("all_gather on axis " + axis) == std::string::npos)
        return std::string("error does not name the collective and axis: ") + e.what();
      return "";
    }
    return "a mis-sized all_gather was accepted";
  });
}

/// The idle barrier (MPI only): rank 0 arrives 200 ms late; the others wait
/// for it, and asleep: their thread's CPU time is a small part of the wait
/// (a polling barrier's is most of it, a core's worth while one is free).
void runIdleBarrier(Suite &suite, Communicator &comm) {
  suite.run("idle barrier on " + comm.axis(), [&]() -> std::string {
    auto cpuSeconds = [] {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
    };
    comm.barrier();
    auto start = std::chrono::steady_clock::now();
    double cpuBefore = cpuSeconds();
    if (comm.rank() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comm.idleBarrier();
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = cpuSeconds() - cpuBefore;
    if (waited < 0.19)
      return "returned after " + std::to_string(waited) + " s, before rank 0 arrived";
    if (comm.rank() != 0 && cpu > 0.1 * waited)
      return "used " + std::to_string(cpu) + " s of CPU time in a wait of " + std::to_string(waited) + " s";
    return "";
  });
}

/// The trainer's bucketed gradient average (host buffers: MPI only): every
/// tensor ends as the ranks' mean, with one all-reduce per bucket moving the
/// tensors' bytes and nothing more.
void runGradientBuckets(Suite &suite, Communicator &comm, CommCounters &counters) {
  const std::string axis = comm.axis();
  const int n = comm.size(), r = comm.rank();
  suite.run("gradient buckets on " + axis, [&]() -> std::string {
    std::vector<int64_t> elements = {5, 0, 1031, 7, 1, 64};
    std::vector<Floats> gradients;
    for (size_t t = 0; t < elements.size(); ++t) {
      gradients.emplace_back(size_t(elements[t]));
      for (int64_t i = 0; i < elements[t]; ++i)
        gradients[t][size_t(i)] = float(valueAt(r, int(t), i));
    }
    std::vector<GradientBucket> buckets = planGradientBuckets(elements, 300);
    auto before = counters.snapshot()[{"all_reduce", axis}];
    averageGradientBuckets(comm, buckets, gradients);
    auto after = counters.snapshot()[{"all_reduce", axis}];
    for (size_t t = 0; t < elements.size(); ++t)
      for (int64_t i = 0; i < elements[t]; ++i) {
        double want = 0;
        for (int k = 0; k < n; ++k)
          want += valueAt(k, int(t), i);
        want = float(want) * (1.0f / float(n));
        if (gradients[t][size_t(i)] != float(want))
          return mismatch(("tensor " + std::to_string(t)).c_str(), i, gradients[t][size_t(i)], want);
      }
    int64_t calls = n > 1 ? int64_t(buckets.size()) : 0;
    int64_t total = std::accumulate(elements.begin(), elements.end(), int64_t(0));
    if (after.calls - before.calls != calls || after.bytes - before.bytes != (n > 1 ? 4 * total : 0))
      return "counted " + std::to_string(after.calls - before.calls) + " all_reduce calls of " +
             std::to_string(after.bytes - before.bytes) + " bytes, expected " + std::to_string(calls) +
             " (one per bucket) of " + std::to_string(4 * total);
    return "";
  });
}

} // namespace

int main(int argc, char **argv) {
  MpiSession mpi(&argc, &argv);
  std::string meshText, backend = "mpi";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--mesh" && i + 1 < argc)
      meshText = argv[++i];
    else if (arg == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else {
      std::fprintf(stderr, "usage: comm-conformance [--mesh dp=2,tp=2] [--backend mpi|nccl]\n");
      return 2;
    }
  }
  return runOrAbort(
      [&]() -> int {
        CommCounters counters;
        auto world = MpiCommunicator::world(&counters);
        MeshShape mesh = meshText.empty() ? MeshShape({{"dp", world->size()}}) : MeshShape::parse(meshText);
        Placement placement = hostPlacement();
        std::unique_ptr<ProcessGroups> groups;
#ifdef COLOSSAL_WITH_NCCL
        std::unique_ptr<NcclCommunicator> ncclWorld;
#endif
        if (backend == "mpi") {
          groups = std::make_unique<ProcessGroups>(ProcessGroups::overMpi(mesh, *world));
        }
#ifdef COLOSSAL_WITH_NCCL
        else if (backend == "nccl") {
          NcclSetup setup = NcclSetup::create(*world, mpi.launch().localRank, &counters);
          ncclWorld = std::move(setup.world);
          groups = std::make_unique<ProcessGroups>(NcclSetup::groups(mesh, *ncclWorld, &counters));
          placement = {&ncclTestAllocate, &ncclTestFree, &ncclTestToDevice, &ncclTestToHost};
        }
#endif
        else {
          fail("comm-conformance", "backend \"" + backend + "\" is not built here");
        }
        Suite suite(*world, placement);
        Communicator *worldComm = world.get();
#ifdef COLOSSAL_WITH_NCCL
        if (ncclWorld)
          worldComm = ncclWorld.get();
#endif
        runSuite(suite, *worldComm, counters, true);
        for (size_t a = 0; a < mesh.axes().size(); ++a)
          runSuite(suite, groups->axis(int(a)), counters, a == 0);
        if (backend == "mpi") {
          runGradientBuckets(suite, *worldComm, counters);
          runIdleBarrier(suite, *worldComm);
          for (size_t a = 0; a < mesh.axes().size(); ++a)
            runGradientBuckets(suite, groups->axis(int(a)), counters);
        }
        if (world->rank() == 0)
          std::printf("comm-conformance: backend %s, %d ranks, mesh %s: %d cases, %d failed\n",
                      backend.c_str(), world->size(), mesh.str().c_str(), suite.cases(),
                      suite.failures());
        return suite.failures() ? 1 : 0;
      },
      [] { MpiSession::abort(1); });
}
