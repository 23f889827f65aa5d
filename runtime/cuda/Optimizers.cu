//===- Optimizers.cu - device multi-tensor optimizer steps ----------------===//
//
// Multi-tensor apply as in Apex: the tensor list is cut into chunks of 64K
// elements; one launch covers up to 24 tensors and 320 chunks, their
// pointers passed in the kernel's parameter block. Per-tensor sums of
// squares are written per chunk and then added chunk by chunk in a fixed
// order, so they do not depend on scheduling (LAMB's trust ratios are
// reproducible run to run).
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "Reduce.cuh"
#include "StreamScratch.h"
#include "colossal/runtime/kernels/Optimizers.h"

#include <cmath>
#include <vector>

namespace colossal::rt::cuda {

namespace {

constexpr int kMaxTensors = 24;
constexpr int kMaxBlocks = 320;
constexpr int64_t kChunk = 65536;
constexpr int kThreads = 512;

struct TensorTable {
  float *param[kMaxTensors], *grad[kMaxTensors], *m[kMaxTensors], *v[kMaxTensors], *update[kMaxTensors];
  int64_t n[kMaxTensors];
  int index[kMaxTensors]; // position in the caller's list (for squares)
  unsigned char decay[kMaxTensors], trust[kMaxTensors];
  unsigned char blockTensor[kMaxBlocks];
  int blockChunk[kMaxBlocks];
  int blockSlot[kMaxBlocks]; // the chunk's position among all chunks of the call
};

enum class Op { Squares, AdamW, LambStage1, LambStage2, Sgd, Lars };

struct Settings {
  float lr, beta1, beta2, eps, weightDecay, gradScale;
  float bias1, bias2, stepSize, bias2Sqrt, oneMinusBeta1, oneMinusBeta2;
  float momentum, dampening, eta;
  int nesterov, firstStep;
};

template <Op op>
__global__ void multiTensorKernel(TensorTable table, Settings s, float *partials, const float *squares) {
  __shared__ float scratch[32];
  int t = table.blockTensor[blockIdx.x];
  int64_t start = int64_t(table.blockChunk[blockIdx.x]) * kChunk;
  int64_t end = min(start + kChunk, table.n[t]);
  float *w = table.param[t], *g = table.grad[t], *m = table.m[t], *v = table.v[t], *u = table.update[t];
  bool decay = table.decay[t];
  float first = 0, second = 0; // partial squares

  float stage2Scale = 0, larsScale = 0, larsDecay = 0;
  if (op == Op::LambStage2) {
    float wn = sqrtf(squares[2 * table.index[t]]), un = sqrtf(squares[2 * table.index[t] + 1]);
    stage2Scale = s.lr * (wn > 0 && un > 0 ? wn / un : 1.0f);
  }
  if (op == Op::Lars) {
    larsDecay = decay ? s.weightDecay : 0.0f;
    float local = 1.0f;
    if (table.trust[t]) {
      float wn = sqrtf(squares[2 * table.index[t]]), gn = sqrtf(squares[2 * table.index[t] + 1]);
      if (wn > 0 && gn > 0)
        local = s.eta * wn / (gn + larsDecay * wn);
    }
    larsScale = s.lr * local;
  }

  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    if (op == Op::Squares) {
      float gi = g[i] * s.gradScale;
      first += w[i] * w[i];
      second += gi * gi;
    } else if (op == Op::AdamW) {
      float gi = g[i] * s.gradScale;
      float wi = w[i] * (decay ? 1.0f - s.lr * s.weightDecay : 1.0f);
      float mi = m[i] * s.beta1 + s.oneMinusBeta1 * gi;
      float vi = v[i] * s.beta2 + s.oneMinusBeta2 * gi * gi;
      float denom = sqrtf(vi) / s.bias2Sqrt + s.eps;
      w[i] = wi + -s.stepSize * mi / denom;
      m[i] = mi;
      v[i] = vi;
    } else if (op == Op::LambStage1) {
      float gi = g[i] * s.gradScale;
      float mi = m[i] * s.beta1 + s.oneMinusBeta1 * gi;
      float vi = v[i] * s.beta2 + s.oneMinusBeta2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float ui = (mi / s.bias1) / (sqrtf(vi / s.bias2) + s.eps);
      if (decay)
        ui = ui + s.weightDecay * w[i];
      u[i] = ui;
      first += w[i] * w[i];
      second += ui * ui;
    } else if (op == Op::LambStage2) {
      w[i] -= stage2Scale * u[i];
    } else if (op == Op::Sgd) {
      float d = g[i] * s.gradScale;
      float wd = decay ? s.weightDecay : 0.0f;
      if (wd != 0)
        d = d + wd * w[i];
      if (s.momentum != 0) {
        float buffer = s.firstStep ? d : m[i] * s.momentum + (1.0f - s.dampening) * d;
        m[i] = buffer;
        d = s.nesterov ? d + s.momentum * buffer : buffer;
      }
      w[i] = w[i] + -s.lr * d;
    } else if (op == Op::Lars) {
      float gi = g[i] * s.gradScale;
      float velocity = m[i] * s.momentum + larsScale * (gi + larsDecay * w[i]);
      m[i] = velocity;
      w[i] -= velocity;
    }
  }
  if (op == Op::Squares || op == Op::LambStage1) {
    first = blockSum(first, scratch);
    second = blockSum(second, scratch);
    if (threadIdx.x == 0) {
      partials[2 * table.blockSlot[blockIdx.x]] = first;
      partials[2 * table.blockSlot[blockIdx.x] + 1] = second;
    }
  }
}

/// squares[2t + k] = sum of partials over tensor t's chunks, in chunk order.
__global__ void finishSquaresKernel(const float *partials, const int *chunkBase, int64_t count, float *squares) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count)
    return;
  float first = 0, second = 0;
  for (int c = chunkBase[t]; c < chunkBase[t + 1]; ++c) {
    first += partials[2 * c];
    second += partials[2 * c + 1];
  }
  squares[2 * t] = first;
  squares[2 * t + 1] = second;
}

/// Runs `op` over every chunk of every tensor, launching whenever the
/// table's tensor or block slots run out (a tensor split across launches is
/// entered again in the next table).
template <Op op>
void apply(Stream stream, const OptimizerTensor *tensors, int64_t count, const Settings &settings, float *partials,
           const float *squares) {
  cudaStream_t st = asStream(stream.handle);
  TensorTable table;
  int entries = 0, blocks = 0, slot = 0;
  int64_t lastEntered = -1; // caller index of the table's last entry
  auto flush = [&] {
    if (blocks > 0) {
      multiTensorKernel<op><<<blocks, kThreads, 0, st>>>(table, settings, partials, squares);
      checkLaunch("multi-tensor optimizer");
    }
    entries = blocks = 0;
    lastEntered = -1;
  };
  for (int64_t t = 0; t < count; ++t) {
    const OptimizerTensor &x = tensors[t];
    int64_t chunks = (x.n + kChunk - 1) / kChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks == kMaxBlocks || (lastEntered != t && entries == kMaxTensors))
        flush();
      if (lastEntered != t) {
        table.param[entries] = x.param, table.grad[entries] = x.grad, table.m[entries] = x.m;
        table.v[entries] = x.v, table.update[entries] = x.update, table.n[entries] = x.n;
        table.index[entries] = int(t), table.decay[entries] = x.decay, table.trust[entries] = x.trustRatio;
        ++entries;
        lastEntered = t;
      }
      table.blockTensor[blocks] = (unsigned char)(entries - 1);
      table.blockChunk[blocks] = int(c);
      table.blockSlot[blocks] = slot++;
      ++blocks;
    }
  }
  flush();
}

int64_t chunksOf(const OptimizerTensor *tensors, int64_t count, std::vector<int> &base) {
  base.assign(size_t(count + 1), 0);
  for (int64_t t = 0; t < count; ++t)
    base[size_t(t + 1)] = base[size_t(t)] + int((tensors[t].n + kChunk - 1) / kChunk);
  return base[size_t(count)];
}

/// Runs a reducing op and finishes the per-tensor squares.
template <Op op>
void applyWithSquares(Stream stream, const OptimizerTensor *tensors, int64_t count, const Settings &settings,
                      float *squares) {
  cudaStream_t st = asStream(stream.handle);
  std::vector<int> base;
  int64_t chunks = chunksOf(tensors, count, base);
  StreamScratch partialScratch(int64_t(size_t(2 * chunks + 2) * sizeof(float)), st, "cudaMallocAsync (partials)");
  StreamScratch baseScratch(int64_t(base.size() * sizeof(int)), st, "cudaMallocAsync (chunk table)");
  float *partials = partialScratch.as<float>();
  int *deviceBase = baseScratch.as<int>();
  check(cudaMemcpyAsync(deviceBase, base.data(), base.size() * sizeof(int), cudaMemcpyHostToDevice, st),
        "cudaMemcpyAsync (chunk table)");
  apply<op>(stream, tensors, count, settings, partials, nullptr);
  if (count > 0) {
    finishSquaresKernel<<<unsigned((count + 255) / 256), 256, 0, st>>>(partials, deviceBase, count, squares);
    checkLaunch("multi-tensor squares");
  }
}

Settings adamSettings(const AdamSettings &a, float gradScale) {
  Settings s{};
  s.lr = a.lr, s.beta1 = a.beta1, s.beta2 = a.beta2, s.eps = a.eps, s.weightDecay = a.weightDecay;
  s.gradScale = gradScale;
  double bias1 = 1.0 - std::pow(double(a.beta1), double(a.step));
  double bias2 = 1.0 - std::pow(double(a.beta2), double(a.step));
  s.bias1 = float(bias1), s.bias2 = float(bias2);
  s.stepSize = float(double(a.lr) / bias1), s.bias2Sqrt = float(std::sqrt(bias2));
  s.oneMinusBeta1 = float(1.0 - double(a.beta1)), s.oneMinusBeta2 = float(1.0 - double(a.beta2));
  return s;
}

} // namespace

void tensorSquares(Stream stream, const OptimizerTensor *tensors, int64_t count, float gradScale, float *squares) {
  Settings s{};
  s.gradScale = gradScale;
  applyWithSquares<Op::Squares>(stream, tensors, count, s, squares);
}

void adamwStep(Stream stream, const OptimizerTensor *tensors, int64_t count, const AdamSettings &settings,
               float gradScale) {
  apply<Op::AdamW>(stream, tensors, count, adamSettings(settings, gradScale), nullptr, nullptr);
}

void lambStage1(Stream stream, const OptimizerTensor *tensors, int64_t count, const AdamSettings &settings,
                float gradScale, float *squares) {
  applyWithSquares<Op::LambStage1>(stream, tensors, count, adamSettings(settings, gradScale), squares);
}

void lambStage2(Stream stream, const OptimizerTensor *tensors, int64_t count, float lr, const float *squares) {
  Settings s{};
  s.lr = lr;
  apply<Op::LambStage2>(stream, tensors, count, s, nullptr, squares);
}

void sgdStep(Stream stream, const OptimizerTensor *tensors, int64_t count, const SgdSettings &settings,
             float gradScale) {
  Settings s{};
  s.lr = settings.lr, s.momentum = settings.momentum, s.dampening = settings.dampening;
  s.weightDecay = settings.weightDecay, s.nesterov = settings.nesterov, s.firstStep = settings.step <= 1;
  s.gradScale = gradScale;
  apply<Op::Sgd>(stream, tensors, count, s, nullptr, nullptr);
}

void larsStep(Stream stream, const OptimizerTensor *tensors, int64_t count, const LarsSettings &settings,
              float gradScale, const float *squares) {
  Settings s{};
  s.lr = settings.lr, s.momentum = settings.momentum, s.eta = settings.eta, s.weightDecay = settings.weightDecay;
  s.gradScale = gradScale;
  apply<Op::Lars>(stream, tensors, count, s, nullptr, squares);
}

} // namespace colossal::rt::cuda
