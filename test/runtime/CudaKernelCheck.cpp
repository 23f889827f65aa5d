//===- CudaKernelCheck.cpp - device kernels against the host ones, and their speed -===//
//
//   cuda-kernel-check [--json FILE]
//
// Every cuda:: kernel and optimizer runs on random inputs and is compared
// with the cpu:: kernel (itself tested against float64 references and finite
// differences); dropout masks must be identical. Then GEMM (fp32, bf16, f16)
// and attention are timed and compared with their floor: FLOPs over the
// datasheet peak of the device (from the cost model's presets). Prints a
// table; exit 0 only when every comparison passed.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Cluster.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/CudaDevice.h"
#include "colossal/runtime/kernels/DeviceTensor.h"
#include "colossal/runtime/kernels/HostTensor.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Optimizers.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace colossal::rt;

namespace {

std::vector<float> randomVector(size_t n, unsigned seed, float low = -1, float high = 1) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(engine);
  return v;
}

/// A device copy of a host vector, freed on scope exit.
template <typename T> struct DeviceVector {
  T *data = nullptr;
  size_t n;
  explicit DeviceVector(const std::vector<T> &host) : n(host.size()) {
    cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(T));
    cuda::copyToDevice(data, host.data(), int64_t(n * sizeof(T)));
  }
  explicit DeviceVector(size_t count) : n(count) {
    cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(T));
    cudaMemset(data, 0, std::max<size_t>(n, 1) * sizeof(T));
  }
  ~DeviceVector() { cudaFree(data); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    cudaDeviceSynchronize();
    cuda::copyToHost(out.data(), data, int64_t(n * sizeof(T)));
    return out;
  }
};

struct Row {
  std::string name;
  double error;
  double tolerance;
};
std::vector<Row> rows;

/// Largest |device - host| / (atol/rtol + |host|), scaled so 1 is the tolerance.
void compare(const std::string &name, const std::vector<float> &device, const std::vector<float> &host, double rtol,
             double atol = 1e-6) {
  double worst = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    double excess = std::fabs(double(device[i]) - host[i]) / (atol + rtol * std::fabs(double(host[i])));
    if (!(excess <= worst)) // NaN counts as a failure
      worst = std::isnan(excess) ? INFINITY : excess;
  }
  rows.push_back({name, worst, 1.0});
}

/// Bit-exact comparison: the error is the number of differing elements, and
/// none is tolerated.
void compareExact(const std::string &name, const std::vector<float> &device, const std::vector<float> &host) {
  double mismatches = 0;
  for (size_t i = 0; i < host.size(); ++i)
    mismatches += std::memcmp(&device[i], &host[i], sizeof(float)) != 0;
  rows.push_back({name, mismatches, 0.0});
}

const Stream hostStream{};

void checkKernels(Stream s) {
  const int64_t rows_ = 64, cols = 1000;
  auto x = randomVector(size_t(rows_ * cols), 1, -3, 3), dy = randomVector(x.size(), 2);
  auto gamma = randomVector(size_t(cols), 3, 0.5, 1.5), beta = randomVector(size_t(cols), 4);
  DeviceVector<float> dx_(x), ddy(dy), dgamma(gamma), dbeta(beta), dout(x.size()), dgrad(x.size());
  std::vector<float> out(x.size()), grad(x.size());

  for (auto approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    const char *tag = approx == GeluApproximation::Tanh ? "gelu tanh" : "gelu";
    cpu::geluForward(hostStream, x.data(), out.data(), int64_t(x.size()), approx);
    cuda::geluForward(s, dx_.data, dout.data, int64_t(x.size()), approx);
    compare(std::string(tag) + " forward", dout.host(), out, 1e-5);
    cpu::geluBackward(hostStream, x.data(), dy.data(), grad.data(), int64_t(x.size()), approx);
    cuda::geluBackward(s, dx_.data, ddy.data, dgrad.data, int64_t(x.size()), approx);
    compare(std::string(tag) + " backward", dgrad.host(), grad, 1e-5);
  }
  cpu::siluForward(hostStream, x.data(), out.data(), int64_t(x.size()));
  cuda::siluForward(s, dx_.data, dout.data, int64_t(x.size()));
  compare("silu forward", dout.host(), out, 1e-5);
  cpu::siluBackward(hostStream, x.data(), dy.data(), grad.data(), int64_t(x.size()));
  cuda::siluBackward(s, dx_.data, ddy.data, dgrad.data, int64_t(x.size()));
  compare("silu backward", dgrad.host(), grad, 1e-5);

  cpu::softmaxForward(hostStream, x.data(), out.data(), rows_, cols);
  cuda::softmaxForward(s, dx_.data, dout.data, rows_, cols);
  compare("softmax forward", dout.host(), out, 1e-5, 1e-8);
  DeviceVector<float> dsoft(out);
  cpu::softmaxBackward(hostStream, out.data(), dy.data(), grad.data(), rows_, cols);
  cuda::softmaxBackward(s, dsoft.data, ddy.data, dgrad.data, rows_, cols);
  compare("softmax backward", dgrad.host(), grad, 1e-4, 1e-7);

  std::vector<float> mean(static_cast<size_t>(rows_)), rstd(static_cast<size_t>(rows_)), dg(static_cast<size_t>(cols)), db(static_cast<size_t>(cols));
  DeviceVector<float> dmean(static_cast<size_t>(rows_)), drstd(static_cast<size_t>(rows_)), ddg(static_cast<size_t>(cols)), ddb(static_cast<size_t>(cols));
  cpu::layerNormForward(hostStream, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data(), rows_,
                        cols, 1e-5f);
  cuda::layerNormForward(s, dx_.data, dgamma.data, dbeta.data, dout.data, dmean.data, drstd.data, rows_, cols, 1e-5f);
  compare("layer_norm forward", dout.host(), out, 1e-4, 1e-5);
  cpu::layerNormBackward(hostStream, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), grad.data(),
                         dg.data(), db.data(), rows_, cols);
  cuda::layerNormBackward(s, ddy.data, dx_.data, dgamma.data, dmean.data, drstd.data, dgrad.data, ddg.data, ddb.data,
                          rows_, cols);
  compare("layer_norm backward dx", dgrad.host(), grad, 1e-3, 1e-5);
  compare("layer_norm backward dgamma", ddg.host(), dg, 1e-3, 1e-4);
  compare("layer_norm backward dbeta", ddb.host(), db, 1e-3, 1e-4);
  cpu::rmsNormForward(hostStream, x.data(), gamma.data(), out.data(), rstd.data(), rows_, cols, 1e-5f);
  cuda::rmsNormForward(s, dx_.data, dgamma.data, dout.data, drstd.data, rows_, cols, 1e-5f);
  compare("rms_norm forward", dout.host(), out, 1e-4, 1e-5);
  cpu::rmsNormBackward(hostStream, dy.data(), x.data(), gamma.data(), rstd.data(), grad.data(), dg.data(), rows_,
                       cols);
  cuda::rmsNormBackward(s, ddy.data, dx_.data, dgamma.data, drstd.data, dgrad.data, ddg.data, rows_, cols);
  compare("rms_norm backward dx", dgrad.host(), grad, 1e-3, 1e-5);
  compare("rms_norm backward dgamma", ddg.host(), dg, 1e-3, 1e-4);

  // Cross-entropy over a 32000-word vocabulary, one row ignored.
  const int64_t ceRows = 16, vocab = 32000;
  auto logits = randomVector(size_t(ceRows * vocab), 5, -6, 6);
  std::vector<int64_t> labels(static_cast<size_t>(ceRows));
  for (int64_t r = 0; r < ceRows; ++r)
    labels[size_t(r)] = (r * 7919) % vocab;
  labels[3] = -100;
  std::vector<float> loss(static_cast<size_t>(ceRows)), lse(static_cast<size_t>(ceRows)), dloss(size_t(ceRows), 1.0f / 15), dlogits(logits.size());
  DeviceVector<float> dlog(logits), dl(static_cast<size_t>(ceRows)), dlse(static_cast<size_t>(ceRows)), ddl(dloss), ddlogits(logits.size());
  DeviceVector<int64_t> dlabels(labels);
  cpu::crossEntropyForward(hostStream, logits.data(), labels.data(), loss.data(), lse.data(), ceRows, vocab, -100);
  cuda::crossEntropyForward(s, dlog.data, dlabels.data, dl.data, dlse.data, ceRows, vocab, -100);
  compare("cross_entropy forward", dl.host(), loss, 1e-5, 1e-5);
  cpu::crossEntropyBackward(hostStream, logits.data(), labels.data(), lse.data(), dloss.data(), dlogits.data(), ceRows,
                            vocab, -100);
  cuda::crossEntropyBackward(s, dlog.data, dlabels.data, dlse.data, ddl.data, ddlogits.data, ceRows, vocab, -100);
  compare("cross_entropy backward", ddlogits.host(), dlogits, 1e-4, 1e-9);

  // Embedding with repeated ids.
  const int64_t tokens = 300, dim = 64, tableRows = 50;
  auto table = randomVector(size_t(tableRows * dim), 6);
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    ids[size_t(t)] = (t * 13) % tableRows;
  std::vector<float> emb(size_t(tokens * dim)), dtable(table.size(), 0.0f);
  auto demb = randomVector(emb.size(), 7);
  DeviceVector<float> dtab(table), dembOut(emb.size()), ddemb(demb), ddtable(table.size());
  DeviceVector<int64_t> dids(ids);
  cpu::embeddingForward(hostStream, table.data(), ids.data(), emb.data(), tokens, tableRows, dim);
  cuda::embeddingForward(s, dtab.data, dids.data, dembOut.data, tokens, tableRows, dim);
  compareExact("embedding forward", dembOut.host(), emb);
  cpu::embeddingBackward(hostStream, demb.data(), ids.data(), dtable.data(), tokens, tableRows, dim);
  cuda::embeddingBackward(s, ddemb.data, dids.data, ddtable.data, tokens, tableRows, dim);
  compare("embedding backward", ddtable.host(), dtable, 1e-5);

  // Dropout: the same mask on both sides, bit for bit, at an odd offset.
  const int64_t n = 1 << 20;
  std::vector<float> ones(size_t(n), 1.0f), hostMask(static_cast<size_t>(n));
  DeviceVector<float> dones(ones), dmask(static_cast<size_t>(n));
  cpu::dropoutForward(hostStream, ones.data(), hostMask.data(), n, 0.1f, 42, 7, 12345);
  cuda::dropoutForward(s, dones.data, dmask.data, n, 0.1f, 42, 7, 12345);
  compareExact("dropout mask (exact)", dmask.host(), hostMask);

  // Casts round to nearest even on both sides.
  std::vector<uint16_t> hostBf(x.size()), hostHalf(x.size());
  DeviceVector<uint16_t> dbf(x.size()), dhalf(x.size());
  cpu::cast(hostStream, x.data(), DType::F32, hostBf.data(), DType::BF16, int64_t(x.size()));
  cuda::cast(s, dx_.data, DType::F32, dbf.data, DType::BF16, int64_t(x.size()));
  cpu::cast(hostStream, x.data(), DType::F32, hostHalf.data(), DType::F16, int64_t(x.size()));
  cuda::cast(s, dx_.data, DType::F32, dhalf.data, DType::F16, int64_t(x.size()));
  auto asFloat = [](const std::vector<uint16_t> &v) { return std::vector<float>(v.begin(), v.end()); };
  compareExact("cast f32->bf16 (exact bits)", asFloat(dbf.host()), asFloat(hostBf));
  compareExact("cast f32->f16 (exact bits)", asFloat(dhalf.host()), asFloat(hostHalf));
}

/// Long reductions at a GPT-2 step's sizes (8192 tokens x 768): the norms'
/// parameter gradients and the generic reduce split the tokens over blocks
/// and add the chunks in order (Reduce.cuh's ColumnSplit).
void checkLongReductions(Stream s) {
  const int64_t rows = 8192, cols = 768;
  auto x = randomVector(size_t(rows * cols), 21, -3, 3), dy = randomVector(x.size(), 22);
  auto gamma = randomVector(size_t(cols), 23, 0.5, 1.5), beta = randomVector(size_t(cols), 24);
  const size_t n = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  std::vector<float> out(x.size()), grad(x.size()), mean(n), rstd(n), dg(c), db(c);
  cpu::layerNormForward(hostStream, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data(), rows,
                        cols, 1e-5f);
  cpu::layerNormBackward(hostStream, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), grad.data(),
                         dg.data(), db.data(), rows, cols);
  DeviceVector<float> dx(x), ddy(dy), dgamma(gamma), dmean(mean), drstd(rstd), dgrad(x.size()), ddg(c), ddb(c);
  cuda::layerNormBackward(s, ddy.data, dx.data, dgamma.data, dmean.data, drstd.data, dgrad.data, ddg.data, ddb.data,
                          rows, cols);
  compare("layer_norm dgamma, 8192 rows", ddg.host(), dg, 1e-3, 1e-3);
  compare("layer_norm dbeta, 8192 rows", ddb.host(), db, 1e-3, 1e-3);
  cpu::rmsNormBackward(hostStream, dy.data(), x.data(), gamma.data(), rstd.data(), grad.data(), dg.data(), rows, cols);
  cuda::rmsNormBackward(s, ddy.data, dx.data, dgamma.data, drstd.data, dgrad.data, ddg.data, rows, cols);
  compare("rms_norm dgamma, 8192 rows", ddg.host(), dg, 1e-3, 1e-3);

  host::Tensor hx = host::Tensor::ofFloats({rows, cols}, x);
  device::Tensor tx = device::upload(hx);
  struct Case {
    const char *name;
    host::ReduceKind kind;
    host::Shape axes, out;
  } cases[] = {{"reduce sum over tokens", host::ReduceKind::Sum, {0}, {cols}},
               {"reduce max over tokens", host::ReduceKind::Max, {0}, {cols}},
               {"reduce mean over features", host::ReduceKind::Mean, {1}, {rows}},
               {"reduce sum of everything", host::ReduceKind::Sum, {}, {}}};
  for (const Case &c : cases) {
    host::Tensor got = device::download(device::reduce(c.kind, tx, c.axes, c.out));
    host::Tensor want = host::reduce(c.kind, hx, c.axes, c.out);
    compare(c.name, std::vector<float>(got.floats.begin(), got.floats.end()),
            std::vector<float>(want.floats.begin(), want.floats.end()), 1e-4, 1e-3);
  }
}

void checkAttention(Stream s) {
  // Plain, grouped-query (three query heads per key/value head), then
  // under dropout (the masks the host draws).
  struct Case {
    bool causal;
    int64_t groups;
    float dropout;
  };
  for (Case c : {Case{false, 1, 0.0f}, Case{true, 1, 0.0f}, Case{true, 3, 0.0f}, Case{true, 3, 0.1f}}) {
    bool causal = c.causal;
    int64_t groups = c.groups;
    AttentionShape a;
    a.batchHeads = 6, a.queries = 300, a.keys = 300, a.headDim = 64, a.scale = 0.125f, a.causal = causal;
    a.groups = groups;
    if (c.dropout > 0)
      a.dropout = attentionDropout(c.dropout, dropoutKeyFor(1, 2, 0, 3, 6 * 300 * 300), 6);
    size_t qn = size_t(a.batchHeads * a.queries * a.headDim), kn = qn / size_t(groups);
    auto q = randomVector(qn, 10), k = randomVector(kn, 11), v = randomVector(kn, 12), dO = randomVector(qn, 13);
    std::vector<float> o(qn), lse(size_t(a.batchHeads * a.queries)), dq(qn), dk(kn), dv(kn);
    cpu::attentionForward(hostStream, a, q.data(), k.data(), v.data(), o.data(), lse.data());
    cpu::attentionBackward(hostStream, a, q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(), dq.data(),
                           dk.data(), dv.data());
    DeviceVector<float> Q(q), K(k), V(v), DO(dO), O(qn), L(lse.size()), DQ(qn), DK(kn), DV(kn);
    cuda::attentionForward(s, a, Q.data, K.data, V.data, O.data, L.data);
    cuda::attentionBackward(s, a, Q.data, K.data, V.data, O.data, DO.data, L.data, DQ.data, DK.data, DV.data);
    std::string tag = std::string(causal ? "attention causal " : "attention ") + (groups > 1 ? "grouped " : "") +
                      (c.dropout > 0 ? "dropout " : "");
    compare(tag + "forward", O.host(), o, 1e-4, 1e-5);
    compare(tag + "lse", L.host(), lse, 1e-5, 1e-5);
    compare(tag + "dq", DQ.host(), dq, 1e-3, 1e-5);
    compare(tag + "dk", DK.host(), dk, 1e-3, 1e-5);
    compare(tag + "dv", DV.host(), dv, 1e-3, 1e-5);
  }
}

void checkGemm(Stream s) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    GemmShape g;
    g.m = 77, g.n = 129, g.k = 300, g.transB = true, g.batch = 3;
    g.strideA = g.m * g.k, g.strideB = g.n * g.k, g.strideC = g.m * g.n;
    auto a = randomVector(size_t(g.batch * g.strideA), 20), b = randomVector(size_t(g.batch * g.strideB), 21);
    std::vector<float> c(size_t(g.batch * g.strideC));
    if (dtype == DType::F32) {
      cpu::gemm(hostStream, g, dtype, a.data(), b.data(), c.data(), 1, 0);
      DeviceVector<float> A(a), B(b), C(c.size());
      cuda::gemm(s, g, dtype, A.data, B.data, C.data, 1, 0);
      compare("gemm f32 batched", C.host(), c, 1e-4, 1e-4);
      continue;
    }
    std::vector<uint16_t> a16(a.size()), b16(b.size()), c16(c.size());
    cpu::cast(hostStream, a.data(), DType::F32, a16.data(), dtype, int64_t(a.size()));
    cpu::cast(hostStream, b.data(), DType::F32, b16.data(), dtype, int64_t(b.size()));
    cpu::gemm(hostStream, g, dtype, a16.data(), b16.data(), c16.data(), 1, 0);
    DeviceVector<uint16_t> A(a16), B(b16), C(c16.size());
    cuda::gemm(s, g, dtype, A.data, B.data, C.data, 1, 0);
    std::vector<uint16_t> back = C.host();
    std::vector<float> got(c.size()), want(c.size());
    cpu::cast(hostStream, back.data(), dtype, got.data(), DType::F32, int64_t(got.size()));
    cpu::cast(hostStream, c16.data(), dtype, want.data(), DType::F32, int64_t(want.size()));
    compare(std::string("gemm ") + nameOf(dtype) + " batched", got, want, dtype == DType::BF16 ? 1.0 / 128 : 1.0 / 1024,
            1e-3);
  }
}

void checkOptimizers(Stream s) {
  const int64_t sizes[] = {100000, 17, 70000, 1}; // chunks cross the 64K boundary
  for (const char *which : {"adamw", "lamb", "sgd", "lars"}) {
    std::vector<std::vector<float>> w, g, m, v, u;
    std::vector<DeviceVector<float> *> owned;
    std::vector<OptimizerTensor> host, dev;
    for (size_t t = 0; t < 4; ++t) {
      size_t n = size_t(sizes[t]);
      w.push_back(randomVector(n, unsigned(30 + t)));
      g.push_back(randomVector(n, unsigned(40 + t)));
      m.push_back(std::vector<float>(n, 0.01f));
      v.push_back(std::vector<float>(n, 0.02f));
      u.push_back(std::vector<float>(n, 0.0f));
    }
    for (size_t t = 0; t < 4; ++t) {
      host.push_back({w[t].data(), g[t].data(), m[t].data(), v[t].data(), u[t].data(), sizes[t], t != 1, t != 1});
      auto *dw = new DeviceVector<float>(w[t]), *dg = new DeviceVector<float>(g[t]), *dm = new DeviceVector<float>(m[t]);
      auto *dv = new DeviceVector<float>(v[t]), *du = new DeviceVector<float>(u[t]);
      owned.insert(owned.end(), {dw, dg, dm, dv, du});
      dev.push_back({dw->data, dg->data, dm->data, dv->data, du->data, sizes[t], t != 1, t != 1});
    }
    AdamSettings adam;
    adam.lr = 0.01f, adam.weightDecay = 0.1f, adam.step = 3;
    std::string name = which;
    std::vector<float> squares(8);
    DeviceVector<float> dsquares(8);
    if (name == "adamw") {
      cpu::adamwStep(hostStream, host.data(), 4, adam, 0.5f);
      cuda::adamwStep(s, dev.data(), 4, adam, 0.5f);
    } else if (name == "lamb") {
      cpu::lambStage1(hostStream, host.data(), 4, adam, 0.5f, squares.data());
      cpu::lambStage2(hostStream, host.data(), 4, adam.lr, squares.data());
      cuda::lambStage1(s, dev.data(), 4, adam, 0.5f, dsquares.data);
      compare("lamb squares", dsquares.host(), squares, 1e-4);
      cuda::lambStage2(s, dev.data(), 4, adam.lr, dsquares.data);
    } else if (name == "sgd") {
      SgdSettings sgd;
      sgd.momentum = 0.9f, sgd.nesterov = true, sgd.weightDecay = 0.01f, sgd.step = 2;
      cpu::sgdStep(hostStream, host.data(), 4, sgd, 0.5f);
      cuda::sgdStep(s, dev.data(), 4, sgd, 0.5f);
    } else {
      LarsSettings lars;
      lars.weightDecay = 0.01f;
      cpu::tensorSquares(hostStream, host.data(), 4, 0.5f, squares.data());
      cpu::larsStep(hostStream, host.data(), 4, lars, 0.5f, squares.data());
      cuda::tensorSquares(s, dev.data(), 4, 0.5f, dsquares.data);
      compare("tensor squares", dsquares.host(), squares, 1e-4);
      cuda::larsStep(s, dev.data(), 4, lars, 0.5f, dsquares.data);
    }
    std::vector<float> allHost, allDevice;
    for (size_t t = 0; t < 4; ++t) {
      auto d = owned[t * 5]->host();
      allHost.insert(allHost.end(), w[t].begin(), w[t].end());
      allDevice.insert(allDevice.end(), d.begin(), d.end());
    }
    compare(name + " step", allDevice, allHost, 1e-5, 1e-6);
    for (auto *p : owned)
      delete p;
  }
}

struct Timing {
  std::string name;
  double seconds, flops, peak;
};
std::vector<Timing> timings;

double timeIt(Stream s, int iterations, const std::function<void()> &body) {
  body(); // warm-up (and cuBLASLt heuristics)
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, static_cast<cudaStream_t>(s.handle));
  for (int i = 0; i < iterations; ++i)
    body();
  cudaEventRecord(stop, static_cast<cudaStream_t>(s.handle));
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1000.0 / iterations;
}

void benchmark(Stream s, const std::optional<colossal::cost::Cluster> &cluster) {
  using colossal::cost::DType;
  auto peakOf = [&](DType d) { return cluster ? cluster->peak(d) : 0.0; };
  const int64_t size = 8192;
  for (const auto &type : {std::pair{colossal::rt::DType::F32, DType::F32},
                           std::pair{colossal::rt::DType::BF16, DType::BF16},
                           std::pair{colossal::rt::DType::F16, DType::F16}}) {
    colossal::rt::DType dtype = type.first;
    DType costType = type.second;
    GemmShape g;
    g.m = g.n = g.k = size;
    DeviceVector<uint32_t> a(size_t(size * size)), b(size_t(size * size)), c(size_t(size * size));
    double seconds = timeIt(s, 10, [&] { cuda::gemm(s, g, dtype, a.data, b.data, c.data, 1, 0); });
    timings.push_back({std::string("gemm ") + nameOf(dtype) + " 8192^3", seconds, 2.0 * size * size * size,
                       peakOf(costType)});
  }
  AttentionShape a;
  a.batchHeads = 32, a.queries = a.keys = 2048, a.headDim = 128, a.scale = 0.088f, a.causal = true;
  size_t n = size_t(a.batchHeads * a.queries * a.headDim);
  DeviceVector<float> q(n), k(n), v(n), o(n), lse(size_t(a.batchHeads * a.queries)), dq(n), dk(n), dv(n);
  double causalFlops = 4.0 * a.batchHeads * a.queries * a.keys * a.headDim / 2;
  double fwd = timeIt(s, 5, [&] { cuda::attentionForward(s, a, q.data, k.data, v.data, o.data, lse.data); });
  timings.push_back({"attention fwd causal 32x2048x128", fwd, causalFlops, peakOf(DType::F32)});
  double bwd = timeIt(s, 3, [&] {
    cuda::attentionBackward(s, a, q.data, k.data, v.data, o.data, o.data, lse.data, dq.data, dk.data, dv.data);
  });
  timings.push_back({"attention bwd causal 32x2048x128", bwd, 2.5 * causalFlops, peakOf(DType::F32)});
}

std::optional<colossal::cost::Cluster> presetFor(const std::string &device) {
  if (device.find("H200") != std::string::npos)
    return colossal::cost::Cluster::preset("h200-node");
  if (device.find("H100") != std::string::npos)
    return colossal::cost::Cluster::preset("dgx-h100");
  if (device.find("A100") != std::string::npos)
    return colossal::cost::Cluster::preset("dgx-a100");
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  std::string jsonPath;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--json")
      jsonPath = argv[i + 1];
  return runOrAbort(
      [&]() -> int {
        cuda::DeviceInfo device = cuda::initializeCudaDevice(0);
        std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", device.name.c_str(), device.computeMajor,
                    device.computeMinor, device.multiprocessors, double(device.memoryBytes) / (1 << 30));
        Stream s = cuda::createStream();
        checkKernels(s);
        checkLongReductions(s);
        checkAttention(s);
        checkGemm(s);
        checkOptimizers(s);
        cuda::synchronize(s);
        int failed = 0;
        std::printf("\n%-34s %12s  %s\n", "check (device vs host)", "error/tol", "verdict");
        for (const Row &r : rows) {
          bool ok = r.error <= r.tolerance;
          failed += !ok;
          if (r.tolerance == 0) // bit-exact rows count differing elements
            std::printf("%-34s %12s  %s\n", r.name.c_str(), (std::to_string(int64_t(r.error)) + " differ").c_str(),
                        ok ? "pass" : "FAIL");
          else
            std::printf("%-34s %12.3g  %s\n", r.name.c_str(), r.error, ok ? "pass" : "FAIL");
        }
        auto cluster = presetFor(device.name);
        benchmark(s, cluster);
        std::printf("\n%-34s %10s %10s %12s %8s\n", "benchmark", "ms", "TFLOP/s", "floor ms", "floor/t");
        for (const Timing &t : timings) {
          double floor = t.peak > 0 ? t.flops / t.peak : 0;
          std::printf("%-34s %10.3f %10.1f %12.3f %8.2f\n", t.name.c_str(), t.seconds * 1e3, t.flops / t.seconds / 1e12,
                      floor * 1e3, floor > 0 ? floor / t.seconds : 0.0);
        }
        if (!jsonPath.empty()) {
          FILE *f = std::fopen(jsonPath.c_str(), "w");
          if (!f)
            fail("cuda-kernel-check", "cannot write " + jsonPath);
          std::fprintf(f, "{\"device\": \"%s\", \"peak_source\": \"%s\", \"checks\": [", device.name.c_str(),
                       cluster ? cluster->name.c_str() : "none");
          for (size_t i = 0; i < rows.size(); ++i)
            std::fprintf(f, "%s{\"name\": \"%s\", \"%s\": %.6g, \"passed\": %s}", i ? ", " : "",
                         rows[i].name.c_str(), rows[i].tolerance == 0 ? "differing_elements" : "error_over_tolerance",
                         std::isfinite(rows[i].error) ? rows[i].error : 1e30,
                         rows[i].error <= rows[i].tolerance ? "true" : "false");
          std::fprintf(f, "], \"benchmarks\": [");
          for (size_t i = 0; i < timings.size(); ++i)
            std::fprintf(f, "%s{\"name\": \"%s\", \"seconds\": %.6g, \"flops\": %.6g, \"peak_flops\": %.6g}",
                         i ? ", " : "", timings[i].name.c_str(), timings[i].seconds, timings[i].flops, timings[i].peak);
          std::fprintf(f, "]}\n");
          std::fclose(f);
        }
        cuda::destroyStream(s);
        std::printf("\ncuda-kernel-check: %zu checks, %d failed\n", rows.size(), failed);
        return failed ? 1 : 0;
      },
      nullptr);
}
