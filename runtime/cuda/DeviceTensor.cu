//===- DeviceTensor.cu - the ops of emitted CUDA programs -----------------===//
//
// Generic index kernels (one thread per output element; shapes of rank 8 or
// less travel by value) for data movement, elementwise ops, reductions and
// einsum; the runtime's kernels for the rest. Sums over many elements
// accumulate in double; scatters into shared rows (gather's and attention's
// gradients) use atomics.
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "Reduce.cuh"
#include "StreamScratch.h"
#include "colossal/runtime/kernels/DeviceTensor.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/kernels/Philox.h"
#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/runtime/kernels/TensorOpShapes.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace colossal::rt::device {

namespace ix = rt::indexing;

namespace {

constexpr int kMaxRank = 8;
const Stream kDefault{};

#define GRID_STRIDE(i, n)                                                                            \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

/// An index map from a row-major iteration space to a strided one:
/// element c of `dims` sits at offset + sum c[d] * strides[d].
struct Strided {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t offset = 0;

  __host__ __device__ int64_t at(int64_t flat) const {
    int64_t where = offset;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = flat % dims[d];
      flat /= dims[d];
      where += c * strides[d];
    }
    return where;
  }
};

Strided strided(const Shape &dims, const Shape &strides, int64_t offset, const char *op) {
  if (dims.size() > size_t(kMaxRank))
    fail(op, "tensors of rank " + std::to_string(dims.size()) + " exceed the CUDA target's " +
                 std::to_string(kMaxRank));
  Strided s;
  s.rank = int(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    s.dims[d] = dims[d], s.strides[d] = strides[d];
  s.offset = offset;
  return s;
}

/// How `in` broadcasts to `out`: stride 0 along broadcast dimensions.
Strided broadcastMap(const Shape &out, const Shape &in, const char *op) {
  if (in.size() > out.size())
    fail(op, "cannot broadcast " + host::describe(in) + " to " + host::describe(out));
  Shape strides(out.size(), 0), inStrides = ix::stridesOf(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[lead + d])
      fail(op, "cannot broadcast " + host::describe(in) + " to " + host::describe(out));
    strides[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  }
  return strided(out, strides, 0, op);
}

void launched(const char *kernel) { cuda::checkLaunch(kernel); }

template <typename T> __global__ void gatherStridedKernel(const T *in, T *out, int64_t n, Strided map) {
  GRID_STRIDE(i, n) out[i] = in[map.at(i)];
}
template <typename T> __global__ void scatterStridedKernel(const T *in, T *out, int64_t n, Strided map, bool add) {
  GRID_STRIDE(i, n) {
    int64_t at = map.at(i);
    out[at] = add ? out[at] + in[i] : in[i];
  }
}

/// out[i] = in[map(i)] for either element kind.
void gatherStrided(const Tensor &in, Tensor &out, const Strided &map) {
  int64_t n = out.elements();
  if (n == 0)
    return;
  if (in.integer)
    gatherStridedKernel<<<cuda::gridFor(n), 256>>>(in.ints(), out.ints(), n, map);
  else
    gatherStridedKernel<<<cuda::gridFor(n), 256>>>(in.floats(), out.floats(), n, map);
  launched("gather (strided)");
}

void scatterStrided(const Tensor &in, Tensor &out, const Strided &map, bool add) {
  int64_t n = in.elements();
  if (n == 0)
    return;
  if (in.integer)
    scatterStridedKernel<<<cuda::gridFor(n), 256>>>(in.ints(), out.ints(), n, map, add);
  else
    scatterStridedKernel<<<cuda::gridFor(n), 256>>>(in.floats(), out.floats(), n, map, add);
  launched("scatter (strided)");
}

void requireFloat(const Tensor &t, const char *op) {
  if (t.integer)
    fail(op, "takes a floating-point operand, got int64 " + host::describe(t.shape));
}

using shapes::axisOf;

__device__ double operandAt(const float *f, const int64_t *i, int64_t at) { return f ? double(f[at]) : double(i[at]); }

__global__ void binaryKernel(int op, const float *af, const int64_t *ai, Strided ma, const float *bf,
                             const int64_t *bi, Strided mb, float *outF, int64_t *outI, int64_t n) {
  GRID_STRIDE(i, n) {
    int64_t pa = ma.at(i), pb = mb.at(i);
    if (outI) {
      int64_t x = ai[pa], y = bi[pb], r = 0;
      switch (op) {
      case 0: r = x + y; break;
      case 1: r = x - y; break;
      case 2: r = x * y; break;
      case 3: r = y == 0 ? 0 : x / y; break;
      case 4: r = int64_t(pow(double(x), double(y))); break;
      case 5: r = x > y ? x : y; break;
      default: r = x < y ? x : y; break;
      }
      outI[i] = r;
    } else {
      float x = float(operandAt(af, ai, pa)), y = float(operandAt(bf, bi, pb)), r = 0;
      switch (op) {
      case 0: r = x + y; break;
      case 1: r = x - y; break;
      case 2: r = x * y; break;
      case 3: r = x / y; break;
      case 4: r = powf(x, y); break;
      case 5: r = isnan(x) || isnan(y) ? NAN : fmaxf(x, y); break;
      default: r = isnan(x) || isnan(y) ? NAN : fminf(x, y); break;
      }
      outF[i] = r;
    }
  }
}

__global__ void compareKernel(int op, const float *af, const int64_t *ai, Strided ma, const float *bf,
                              const int64_t *bi, Strided mb, int64_t *out, int64_t n) {
  GRID_STRIDE(i, n) {
    double x = operandAt(af, ai, ma.at(i)), y = operandAt(bf, bi, mb.at(i));
    out[i] = op == 0 ? x == y : op == 1 ? x < y : x > y;
  }
}

__global__ void whereKernel(const int64_t *c, Strided mc, const float *af, const int64_t *ai, Strided ma,
                            const float *bf, const int64_t *bi, Strided mb, float *outF, int64_t *outI, int64_t n) {
  GRID_STRIDE(i, n) {
    bool take = c[mc.at(i)] != 0;
    if (outI)
      outI[i] = take ? ai[ma.at(i)] : bi[mb.at(i)];
    else
      outF[i] = take ? af[ma.at(i)] : bf[mb.at(i)];
  }
}

__global__ void unaryKernel(int op, const float *x, float *y, int64_t n) {
  GRID_STRIDE(i, n) {
    float v = x[i];
    switch (op) {
    case int(Unary::Sqrt): v = sqrtf(v); break;
    case int(Unary::Reciprocal): v = 1.0f / v; break;
    case int(Unary::Neg): v = -v; break;
    case int(Unary::Abs): v = fabsf(v); break;
    case int(Unary::Exp): v = expf(v); break;
    case int(Unary::Log): v = logf(v); break;
    case int(Unary::Erf): v = erff(v); break;
    case int(Unary::Tanh): v = tanhf(v); break;
    case int(Unary::Sigmoid): v = 1.0f / (1.0f + expf(-v)); break;
    case int(Unary::Relu): v = v > 0 ? v : 0.0f; break;
    case int(Unary::Sin): v = sinf(v); break;
    case int(Unary::Cos): v = cosf(v); break;
    default: break;
    }
    y[i] = v;
  }
}

__global__ void castKernel(const float *f, const int64_t *in, float *outF, int64_t *outI, bool toBool, int64_t n) {
  GRID_STRIDE(i, n) {
    double v = f ? double(f[i]) : double(in[i]);
    if (outF)
      outF[i] = float(v);
    else if (toBool)
      outI[i] = v != 0;
    else
      outI[i] = isnan(v) || fabs(v) >= 9.2e18 ? 0 : int64_t(v);
  }
}

__global__ void roundKernel(const float *x, float *out, bool bfloat, int64_t n) {
  GRID_STRIDE(i, n) {
    out[i] = bfloat ? __bfloat162float(__float2bfloat16_rn(x[i])) : __half2float(__float2half_rn(x[i]));
  }
}

/// One thread per output element; `kept` maps it into the input, `reduced`
/// walks the reduced elements from there. For few reduced elements.
__global__ void reduceKernel(const float *x, float *out, int64_t n, Strided kept, Strided reduced, int64_t count,
                             int kind) {
  GRID_STRIDE(i, n) {
    int64_t base = kept.at(i);
    double acc = kind == 2 ? -INFINITY : 0.0;
    for (int64_t r = 0; r < count; ++r) {
      double v = x[base + reduced.at(r)];
      acc = kind == 2 ? fmax(acc, v) : acc + v;
    }
    out[i] = float(kind == 1 ? acc / double(count) : acc);
  }
}

__device__ __forceinline__ double combine(double acc, double v, int kind) { return kind == 2 ? fmax(acc, v) : acc + v; }

/// One chunk of rows of a long reduction (ColumnSplit) for a block of
/// outputs, into `partial` ([splits, n]). Where adjacent outputs are adjacent
/// in memory (a bias gradient), lanes take outputs and row groups split the
/// chunk; otherwise (a row's sum) each warp takes one output and its lanes
/// split the chunk. Either way every partial sum has a fixed order.
__global__ void reducePartialKernel(const float *x, double *partial, int64_t n, Strided kept, Strided reduced,
                                    int64_t count, int64_t chunk, int kind, bool lanesTakeOutputs) {
  using cuda::ColumnSplit;
  __shared__ double sums[ColumnSplit::kRowGroups][ColumnSplit::kLanes];
  const int lane = threadIdx.x, group = threadIdx.y;
  int64_t i, first, step;
  if (lanesTakeOutputs)
    i = int64_t(blockIdx.x) * ColumnSplit::kLanes + lane, first = group, step = ColumnSplit::kRowGroups;
  else
    i = int64_t(blockIdx.x) * ColumnSplit::kRowGroups + group, first = lane, step = ColumnSplit::kLanes;
  int64_t begin = int64_t(blockIdx.y) * chunk, end = min(count, begin + chunk);
  double acc = kind == 2 ? -INFINITY : 0.0;
  if (i < n) {
    int64_t base = kept.at(i);
    for (int64_t r = begin + first; r < end; r += step)
      acc = combine(acc, x[base + reduced.at(r)], kind);
  }
  sums[group][lane] = acc;
  __syncthreads();
  if (i >= n)
    return;
  if (lanesTakeOutputs && group == 0) {
    for (int k = 1; k < ColumnSplit::kRowGroups; ++k)
      acc = combine(acc, sums[k][lane], kind);
    partial[int64_t(blockIdx.y) * n + i] = acc;
  } else if (!lanesTakeOutputs && lane == 0) {
    for (int k = 1; k < ColumnSplit::kLanes; ++k)
      acc = combine(acc, sums[group][k], kind);
    partial[int64_t(blockIdx.y) * n + i] = acc;
  }
}

__global__ void reduceFinishKernel(const double *partial, float *out, int64_t n, int64_t splits, int64_t count,
                                   int kind) {
  GRID_STRIDE(i, n) {
    double acc = kind == 2 ? -INFINITY : 0.0;
    for (int64_t k = 0; k < splits; ++k)
      acc = combine(acc, partial[k * n + i], kind);
    out[i] = float(kind == 1 ? acc / double(count) : acc);
  }
}

template <typename T>
__global__ void gatherRowsKernel(const T *data, const int64_t *indices, T *out, int64_t outer, int64_t n,
                                 int64_t count, int64_t inner, int *bad) {
  GRID_STRIDE(e, outer * count * inner) {
    int64_t j = e % inner, i = (e / inner) % count, o = e / (inner * count);
    int64_t at = indices[i] < 0 ? indices[i] + n : indices[i];
    if (at < 0 || at >= n) {
      *bad = 1;
      continue;
    }
    out[e] = data[(o * n + at) * inner + j];
  }
}

__global__ void gatherGradKernel(const int64_t *indices, const float *dy, float *ddata, int64_t outer, int64_t n,
                                 int64_t count, int64_t inner, int *bad) {
  GRID_STRIDE(e, outer * count * inner) {
    int64_t j = e % inner, i = (e / inner) % count, o = e / (inner * count);
    int64_t at = indices[i] < 0 ? indices[i] + n : indices[i];
    if (at < 0 || at >= n) {
      *bad = 1;
      continue;
    }
    atomicAdd(&ddata[(o * n + at) * inner + j], dy[e]);
  }
}

/// Checks a device flag the kernels raise on an index outside its dimension.
void requireNoBadIndex(int *flag, const char *op) {
  int bad = 0;
  cuda::check(cudaMemcpy(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost), op);
  cudaFree(flag);
  if (bad)
    fail(op, "an index lies outside its dimension");
}

int *badFlag() {
  int *flag = nullptr;
  cuda::check(cudaMalloc(&flag, sizeof(int)), "cudaMalloc");
  cuda::check(cudaMemset(flag, 0, sizeof(int)), "cudaMemset");
  return flag;
}

__global__ void triluKernel(const float *xf, const int64_t *xi, float *of, int64_t *oi, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  GRID_STRIDE(e, n) {
    int64_t c = e % cols, r = (e / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    if (of)
      of[e] = keep ? xf[e] : 0.0f;
    else
      oi[e] = keep ? xi[e] : 0;
  }
}

__global__ void softmaxAxisKernel(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, bool log) {
  GRID_STRIDE(e, outer * inner) {
    int64_t o = e / inner, i = e % inner;
    const float *row = x + o * n * inner + i;
    float max = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      max = fmaxf(max, row[j * inner]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += exp(double(row[j * inner]) - max);
    for (int64_t j = 0; j < n; ++j) {
      double v = double(row[j * inner]) - max;
      y[o * n * inner + j * inner + i] = float(log ? v - ::log(sum) : exp(v) / sum);
    }
  }
}

/// Einsum: one thread per output element sums over the contracted letters.
struct EinsumPlan {
  int letters = 0, outputLetters = 0, inputs = 0;
  int64_t sizes[kMaxRank] = {};                 // by letter; output letters first
  int64_t strides[3][kMaxRank] = {};            // per input, per letter (0: absent)
  int64_t contracted = 1;                       // product of contracted sizes
};

__global__ void einsumKernel(const float *a, const float *b, const float *c, float *out, int64_t n, EinsumPlan p) {
  const float *in[3] = {a, b, c};
  GRID_STRIDE(e, n) {
    int64_t coord[kMaxRank];
    int64_t rest = e;
    for (int l = p.outputLetters - 1; l >= 0; --l)
      coord[l] = rest % p.sizes[l], rest /= p.sizes[l];
    double acc = 0;
    for (int64_t r = 0; r < p.contracted; ++r) {
      int64_t cr = r;
      for (int l = p.letters - 1; l >= p.outputLetters; --l)
        coord[l] = cr % p.sizes[l], cr /= p.sizes[l];
      double value = 1;
      for (int t = 0; t < p.inputs; ++t) {
        int64_t at = 0;
        for (int l = 0; l < p.letters; ++l)
          at += coord[l] * p.strides[t][l];
        value *= double(in[t][at]);
      }
      acc += value;
    }
    out[e] = float(acc);
  }
}

/// Attention with a mask, by definition: one thread per query row.
struct MaskedAttention {
  int64_t batch, queries, keys, headDim, valueDim;
  int64_t groups; // query heads per key/value head
  AttentionDropout dropout;
  float scale;
  bool causal, booleanMask;
  Strided mask; // over [batch..., sq, sk] flattened to [batch * sq * sk]
};

__device__ float maskedScore(const MaskedAttention &s, const float *q, const float *k, const float *maskF,
                             const int64_t *maskI, int64_t b, int64_t i, int64_t j) {
  int64_t at = (b * s.queries + i) * s.keys + j;
  bool visible = !s.causal || j <= i + s.keys - s.queries;
  if (visible && maskI && maskI[s.mask.at(at)] == 0)
    visible = false;
  if (!visible)
    return -INFINITY;
  double dot = 0;
  for (int64_t c = 0; c < s.headDim; ++c)
    dot += double(q[(b * s.queries + i) * s.headDim + c]) * double(k[(b / s.groups * s.keys + j) * s.headDim + c]);
  return float(dot * s.scale + (maskF ? double(maskF[s.mask.at(at)]) : 0.0));
}

__device__ void rowStatistics(const MaskedAttention &s, const float *q, const float *k, const float *maskF,
                              const int64_t *maskI, int64_t b, int64_t i, float &max, double &sum) {
  max = -INFINITY;
  for (int64_t j = 0; j < s.keys; ++j)
    max = fmaxf(max, maskedScore(s, q, k, maskF, maskI, b, i, j));
  sum = 0;
  if (max == -INFINITY)
    return;
  for (int64_t j = 0; j < s.keys; ++j)
    sum += exp(double(maskedScore(s, q, k, maskF, maskI, b, i, j)) - max);
}

__global__ void maskedAttentionForward(MaskedAttention s, const float *q, const float *k, const float *v,
                                       const float *maskF, const int64_t *maskI, float *out) {
  GRID_STRIDE(row, s.batch * s.queries) {
    int64_t b = row / s.queries, i = row % s.queries;
    float max;
    double sum;
    rowStatistics(s, q, k, maskF, maskI, b, i, max, sum);
    float *o = out + row * s.valueDim;
    for (int64_t c = 0; c < s.valueDim; ++c)
      o[c] = 0;
    if (sum <= 0)
      continue;
    for (int64_t j = 0; j < s.keys; ++j) {
      float p = float(exp(double(maskedScore(s, q, k, maskF, maskI, b, i, j)) - max) / sum) *
                s.dropout.factor(b, s.queries, s.keys, i, j);
      for (int64_t c = 0; c < s.valueDim; ++c)
        o[c] += p * v[(b / s.groups * s.keys + j) * s.valueDim + c];
    }
  }
}

__global__ void maskedAttentionBackward(MaskedAttention s, const float *q, const float *k, const float *v,
                                        const float *maskF, const int64_t *maskI, const float *dOut, float *dq,
                                        float *dk, float *dv) {
  GRID_STRIDE(row, s.batch * s.queries) {
    int64_t b = row / s.queries, i = row % s.queries;
    float max;
    double sum;
    rowStatistics(s, q, k, maskF, maskI, b, i, max, sum);
    if (sum <= 0)
      continue;
    const float *dO = dOut + row * s.valueDim;
    double rowDot = 0;
    for (int64_t j = 0; j < s.keys; ++j) {
      double p = exp(double(maskedScore(s, q, k, maskF, maskI, b, i, j)) - max) / sum, g = 0;
      for (int64_t c = 0; c < s.valueDim; ++c)
        g += double(dO[c]) * v[(b / s.groups * s.keys + j) * s.valueDim + c];
      rowDot += p * g * s.dropout.factor(b, s.queries, s.keys, i, j);
    }
    for (int64_t j = 0; j < s.keys; ++j) {
      double p = exp(double(maskedScore(s, q, k, maskF, maskI, b, i, j)) - max) / sum, g = 0;
      double factor = s.dropout.factor(b, s.queries, s.keys, i, j);
      for (int64_t c = 0; c < s.valueDim; ++c) {
        g += double(dO[c]) * v[(b / s.groups * s.keys + j) * s.valueDim + c];
        atomicAdd(&dv[(b / s.groups * s.keys + j) * s.valueDim + c], float(p * factor * dO[c]));
      }
      double ds = p * (factor * g - rowDot) * s.scale;
      for (int64_t c = 0; c < s.headDim; ++c) {
        dq[row * s.headDim + c] += float(ds * k[(b / s.groups * s.keys + j) * s.headDim + c]);
        atomicAdd(&dk[(b / s.groups * s.keys + j) * s.headDim + c], float(ds * q[row * s.headDim + c]));
      }
    }
  }
}

__global__ void dropoutKernel(const float *x, float *y, int64_t *mask, int64_t n, float ratio, DropoutKey key) {
  GRID_STRIDE(i, n) {
    bool keep = dropoutKeeps(key.seed, key.step, key.firstIndex + uint64_t(i), ratio);
    mask[i] = keep;
    y[i] = keep ? float(double(x[i]) / (1.0 - double(ratio))) : 0.0f;
  }
}

void gemmBatched(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n, int64_t batch,
                 int64_t strideA, int64_t strideB, bool transA = false, bool transB = false) {
  GemmShape g;
  g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB;
  g.batch = batch, g.strideA = strideA, g.strideB = strideB, g.strideC = m * n;
  cuda::gemm(kDefault, g, DType::F32, a, b, c, 1.0f, 0.0f);
}

} // namespace

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Tensor Tensor::zeros(Shape shape, bool integer) {
  Tensor t;
  t.shape = std::move(shape);
  t.integer = integer;
  // Integers are int64, floats float32 (storageBytes): a float tensor is
  // half an integer one's size.
  size_t bytes = size_t(std::max<int64_t>(1, ix::product(t.shape))) * (integer ? 8 : 4);
  // Charged to the scope's category (the step's values are activations).
  MemoryCategory category = MemoryScope::category();
  void *p = allocateDeviceTracked(int64_t(bytes), category);
  cuda::check(cudaMemset(p, 0, bytes), "cudaMemset (tensor)");
  t.data = std::shared_ptr<void>(p, [bytes, category](void *q) { freeDeviceTracked(q, int64_t(bytes), category); });
  return t;
}

int64_t Tensor::elements() const { return ix::product(shape); }

Tensor Tensor::ofFloats(Shape shape, const Floats &values) {
  return upload(host::Tensor::ofFloats(std::move(shape), values));
}

Tensor Tensor::ofInts(Shape shape, const Ints &values) {
  return upload(host::Tensor::ofInts(std::move(shape), values));
}

Tensor upload(const host::Tensor &t) {
  Tensor d = Tensor::zeros(t.shape, t.integer);
  size_t bytes = t.integer ? t.ints.size() * sizeof(int64_t) : t.floats.size() * sizeof(float);
  if (bytes)
    cuda::check(cudaMemcpy(d.data.get(), t.integer ? static_cast<const void *>(t.ints.data()) : t.floats.data(),
                           bytes, cudaMemcpyHostToDevice),
                "upload");
  return d;
}

host::Tensor download(const Tensor &t) {
  host::Tensor h = host::Tensor::zeros(t.shape, t.integer);
  size_t bytes = t.integer ? h.ints.size() * sizeof(int64_t) : h.floats.size() * sizeof(float);
  if (bytes)
    cuda::check(cudaMemcpy(t.integer ? static_cast<void *>(h.ints.data()) : h.floats.data(), t.data.get(), bytes,
                           cudaMemcpyDeviceToHost),
                "download");
  return h;
}

void expect(const Tensor &t, const Shape &shape, bool integer, const char *what) {
  if (t.shape != shape || t.integer != integer)
    fail(what, "produced " + std::string(t.integer ? "int64 " : "float ") + host::describe(t.shape) +
                   ", the program expects " + (integer ? "int64 " : "float ") + host::describe(shape));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Tensor binary(Binary op, const Tensor &a, const Tensor &b, const Shape &out, bool integerResult) {
  if (integerResult && (!a.integer || !b.integer))
    fail("elementwise op", "an integer result needs integer operands");
  Tensor r = Tensor::zeros(out, integerResult);
  int64_t n = r.elements();
  binaryKernel<<<cuda::gridFor(n), 256>>>(int(op), a.integer ? nullptr : a.floats(), a.integer ? a.ints() : nullptr,
                                          broadcastMap(out, a.shape, "elementwise op"),
                                          b.integer ? nullptr : b.floats(), b.integer ? b.ints() : nullptr,
                                          broadcastMap(out, b.shape, "elementwise op"),
                                          integerResult ? nullptr : r.floats(), integerResult ? r.ints() : nullptr, n);
  launched("binary");
  return r;
}

Tensor compare(Compare op, const Tensor &a, const Tensor &b, const Shape &out) {
  Tensor r = Tensor::zeros(out, true);
  int64_t n = r.elements();
  compareKernel<<<cuda::gridFor(n), 256>>>(int(op), a.integer ? nullptr : a.floats(), a.integer ? a.ints() : nullptr,
                                           broadcastMap(out, a.shape, "comparison"), b.integer ? nullptr : b.floats(),
                                           b.integer ? b.ints() : nullptr, broadcastMap(out, b.shape, "comparison"),
                                           r.ints(), n);
  launched("compare");
  return r;
}

Tensor where(const Tensor &condition, const Tensor &a, const Tensor &b, const Shape &out) {
  if (!condition.integer || a.integer != b.integer)
    fail("where", "takes an integer condition and branches of one kind");
  Tensor r = Tensor::zeros(out, a.integer);
  int64_t n = r.elements();
  whereKernel<<<cuda::gridFor(n), 256>>>(condition.ints(), broadcastMap(out, condition.shape, "where"),
                                         a.integer ? nullptr : a.floats(), a.integer ? a.ints() : nullptr,
                                         broadcastMap(out, a.shape, "where"), b.integer ? nullptr : b.floats(),
                                         b.integer ? b.ints() : nullptr, broadcastMap(out, b.shape, "where"),
                                         a.integer ? nullptr : r.floats(), a.integer ? r.ints() : nullptr, n);
  launched("where");
  return r;
}

Tensor unary(Unary op, const Tensor &x) {
  requireFloat(x, "unary op");
  Tensor out = Tensor::zeros(x.shape);
  int64_t n = x.elements();
  switch (op) {
  case Unary::Silu: cuda::siluForward(kDefault, x.floats(), out.floats(), n); return out;
  case Unary::Gelu: cuda::geluForward(kDefault, x.floats(), out.floats(), n, GeluApproximation::None); return out;
  case Unary::GeluTanh: cuda::geluForward(kDefault, x.floats(), out.floats(), n, GeluApproximation::Tanh); return out;
  default: break;
  }
  unaryKernel<<<cuda::gridFor(n), 256>>>(int(op), x.floats(), out.floats(), n);
  launched("unary");
  return out;
}

Tensor cast(const Tensor &x, bool toInteger, bool toBool) {
  Tensor out = Tensor::zeros(x.shape, toInteger || toBool);
  int64_t n = x.elements();
  castKernel<<<cuda::gridFor(n), 256>>>(x.integer ? nullptr : x.floats(), x.integer ? x.ints() : nullptr,
                                        out.integer ? nullptr : out.floats(), out.integer ? out.ints() : nullptr,
                                        toBool, n);
  launched("cast");
  return out;
}

int64_t storageBytes(const Tensor &t) { return t.data ? t.elements() * (t.integer ? 8 : 4) : 0; }

void release(Tensor &t) { t = Tensor(); }

namespace {

/// Writes x rounded to `storage` into out (which may be x itself).
void roundInto(const Tensor &x, Tensor &out, DType storage) {
  requireFloat(x, "roundTo");
  if (storage != DType::BF16 && storage != DType::F16)
    fail("roundTo", std::string("rounds to bf16 or f16, not ") + nameOf(storage));
  int64_t n = x.elements();
  if (n)
    roundKernel<<<cuda::gridFor(n), 256>>>(x.floats(), out.floats(), storage == DType::BF16, n);
  launched("roundTo");
}

} // namespace

Tensor roundTo(const Tensor &x, DType storage) {
  Tensor out = Tensor::zeros(x.shape);
  roundInto(x, out, storage);
  return out;
}

Tensor roundTo(Tensor &&x, DType storage) {
  // A value the caller gives up and no other handle shares is rounded in
  // place, as on the host: no second tensor of its size.
  Tensor taken = std::move(x);
  if (taken.data.use_count() != 1)
    return roundTo(static_cast<const Tensor &>(taken), storage);
  roundInto(taken, taken, storage);
  return taken;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

Tensor matmul(const Tensor &a, const Tensor &b, const Shape &out) {
  requireFloat(a, "matmul");
  requireFloat(b, "matmul");
  shapes::MatmulDims d = shapes::matmulDims(a.shape, b.shape);
  int64_t m = d.m, k = d.k, n = d.n, aCount = ix::product(d.aBatch), bCount = ix::product(d.bBatch),
          batch = ix::product(d.batch);
  Tensor r = Tensor::zeros(out);
  if (r.elements() != batch * m * n)
    fail("matmul", "the product of " + host::describe(a.shape) + " and " + host::describe(b.shape) + " is not " +
                       host::describe(out));
  if (aCount == batch && bCount == batch) {
    gemmBatched(a.floats(), b.floats(), r.floats(), m, k, n, batch, m * k, k * n);
  } else if (bCount == 1 && aCount == batch) {
    // One right-hand matrix: the batches stack into rows.
    gemmBatched(a.floats(), b.floats(), r.floats(), batch * m, k, n, 1, 0, 0);
  } else if (aCount == 1 && bCount == batch) {
    gemmBatched(a.floats(), b.floats(), r.floats(), m, k, n, batch, 0, k * n);
  } else {
    // General broadcasting: one product per batch element.
    TrackedVector<int64_t> ia = ix::broadcastIndex(d.batch, d.aBatch), ib = ix::broadcastIndex(d.batch, d.bBatch);
    for (size_t i = 0; i < ia.size(); ++i)
      gemmBatched(a.floats() + ia[i] * m * k, b.floats() + ib[i] * k * n, r.floats() + int64_t(i) * m * n, m, k, n,
                  1, 0, 0);
  }
  return r;
}

Tensor gemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA, bool transB, float alpha, float beta,
            const Shape &out) {
  Tensor r = Tensor::zeros(out);
  int64_t m = out[0], n = out[1], k = transA ? a.shape[0] : a.shape[1];
  gemmBatched(a.floats(), b.floats(), r.floats(), m, k, n, 1, 0, 0, transA, transB);
  Tensor scaled = binary(Binary::Mul, r, Tensor::ofFloats({}, {alpha}), out, false);
  if (!c)
    return scaled;
  return binary(Binary::Add, scaled, binary(Binary::Mul, *c, Tensor::ofFloats({}, {beta}), c->shape, false), out,
                false);
}

Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias, const Shape &out, bool transposedWeight) {
  requireFloat(x, "linear");
  requireFloat(w, "linear");
  if (w.shape.size() != 2)
    fail("linear", "the weight " + host::describe(w.shape) + " is not a matrix");
  int64_t k = x.shape.back(), n = w.shape[transposedWeight ? 0 : 1], rows = x.elements() / std::max<int64_t>(1, k);
  if (w.shape[transposedWeight ? 1 : 0] != k)
    fail("linear", "cannot multiply " + host::describe(x.shape) + " by " + host::describe(w.shape) +
                       (transposedWeight ? " transposed" : ""));
  Tensor r = Tensor::zeros(out);
  gemmBatched(x.floats(), w.floats(), r.floats(), rows, k, n, 1, 0, 0, false, transposedWeight);
  if (bias)
    cuda::addRowBias(kDefault, r.floats(), bias->floats(), r.floats(), rows, n);
  return r;
}

Tensor conv(const Tensor &, const Tensor &, const Tensor *, const Shape &, const Shape &, const Shape &, int64_t,
            const Shape &) {
  fail("conv", "convolution has no CUDA lowering yet (the host target runs it)");
}

std::vector<Tensor> convGrad(const Tensor &, const Tensor &, const Tensor &, const Shape &, const Shape &,
                             const Shape &, int64_t) {
  fail("conv_grad", "convolution has no CUDA lowering yet (the host target runs it)");
}

Tensor einsum(const std::string &equation0, const std::vector<const Tensor *> &inputs, const Shape &out) {
  std::string equation = equation0;
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  size_t arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find('.') != std::string::npos || inputs.size() > 3)
    fail("einsum", "'" + equation0 + "': the CUDA target takes explicit outputs, no ellipsis, up to 3 operands");
  std::vector<std::string> terms;
  std::string lhs = equation.substr(0, arrow), rhs = equation.substr(arrow + 2);
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1)
    terms.push_back(lhs.substr(start, comma - start));
  terms.push_back(lhs.substr(start));
  if (terms.size() != inputs.size())
    fail("einsum", "'" + equation0 + "' names another number of operands");
  std::string letters = rhs;
  for (const std::string &t : terms)
    for (char l : t)
      if (letters.find(l) == std::string::npos)
        letters += l;
  if (letters.size() > size_t(kMaxRank))
    fail("einsum", "more than " + std::to_string(kMaxRank) + " letters");
  EinsumPlan p;
  p.letters = int(letters.size()), p.outputLetters = int(rhs.size()), p.inputs = int(inputs.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    requireFloat(*inputs[t], "einsum");
    Shape strides = ix::stridesOf(inputs[t]->shape);
    for (size_t d = 0; d < terms[t].size(); ++d) {
      size_t l = letters.find(terms[t][d]);
      p.sizes[l] = inputs[t]->shape[d];
      p.strides[t][l] += strides[d];
    }
  }
  for (size_t l = rhs.size(); l < letters.size(); ++l)
    p.contracted *= p.sizes[l];
  Tensor r = Tensor::zeros(out);
  int64_t n = r.elements();
  einsumKernel<<<cuda::gridFor(n), 256>>>(inputs[0]->floats(), inputs.size() > 1 ? inputs[1]->floats() : nullptr,
                                          inputs.size() > 2 ? inputs[2]->floats() : nullptr, r.floats(), n, p);
  launched("einsum");
  return r;
}

//===----------------------------------------------------------------------===//
// Normalisation, attention, losses
//===----------------------------------------------------------------------===//

Tensor softmax(const Tensor &x, int64_t axis, bool log) {
  requireFloat(x, "softmax");
  axis = axisOf(axis, x.shape, "softmax");
  int64_t outer = ix::product(x.shape, 0, size_t(axis)), n = x.shape[size_t(axis)],
          inner = ix::product(x.shape, size_t(axis) + 1);
  Tensor out = Tensor::zeros(x.shape);
  if (!log && inner == 1) {
    cuda::softmaxForward(kDefault, x.floats(), out.floats(), outer, n);
    return out;
  }
  softmaxAxisKernel<<<cuda::gridFor(outer * inner), 256>>>(x.floats(), out.floats(), outer, n, inner, log);
  launched("softmax");
  return out;
}

namespace {

shapes::NormRows rowsOf(const Tensor &x, int64_t axis, const Tensor *scale, const char *op) {
  requireFloat(x, op);
  return shapes::normRows(x.shape, axis, scale ? std::optional<int64_t>(scale->elements()) : std::nullopt, op);
}

const float *floatsOrNull(const Tensor *t) { return t ? t->floats() : nullptr; }

} // namespace

Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias, int64_t axis, float eps) {
  shapes::NormRows r = rowsOf(x, axis, scale, "layer_norm");
  Tensor out = Tensor::zeros(x.shape), stats = Tensor::zeros({2 * r.rows});
  cuda::layerNormForward(kDefault, x.floats(), floatsOrNull(scale), floatsOrNull(bias), out.floats(), stats.floats(),
                         stats.floats() + r.rows, r.rows, r.cols, eps);
  return out;
}

Tensor rmsNorm(const Tensor &x, const Tensor *scale, int64_t axis, float eps) {
  shapes::NormRows r = rowsOf(x, axis, scale, "rms_norm");
  Tensor out = Tensor::zeros(x.shape), rstd = Tensor::zeros({r.rows});
  cuda::rmsNormForward(kDefault, x.floats(), floatsOrNull(scale), out.floats(), rstd.floats(), r.rows, r.cols, eps);
  return out;
}

std::vector<Tensor> layerNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                  bool hasBias, size_t results) {
  shapes::NormRows r = rowsOf(x, axis, scale, "layer_norm_grad");
  Shape paramShape = scale ? scale->shape : Shape{r.cols};
  Tensor y = Tensor::zeros(x.shape), stats = Tensor::zeros({2 * r.rows}), dx = Tensor::zeros(x.shape),
         dscale = Tensor::zeros(paramShape), dbias = Tensor::zeros(paramShape);
  cuda::layerNormForward(kDefault, x.floats(), floatsOrNull(scale), nullptr, y.floats(), stats.floats(),
                         stats.floats() + r.rows, r.rows, r.cols, eps);
  cuda::layerNormBackward(kDefault, dy.floats(), x.floats(), floatsOrNull(scale), stats.floats(),
                          stats.floats() + r.rows, dx.floats(), scale ? dscale.floats() : nullptr,
                          hasBias ? dbias.floats() : nullptr, r.rows, r.cols);
  std::vector<Tensor> out{dx, dscale, dbias};
  out.resize(std::min<size_t>(results, 3));
  return out;
}

std::vector<Tensor> rmsNormGrad(const Tensor &x, const Tensor *scale, const Tensor &dy, int64_t axis, float eps,
                                size_t results) {
  shapes::NormRows r = rowsOf(x, axis, scale, "rms_norm_grad");
  Tensor y = Tensor::zeros(x.shape), rstd = Tensor::zeros({r.rows}), dx = Tensor::zeros(x.shape),
         dscale = Tensor::zeros(scale ? scale->shape : Shape{r.cols});
  cuda::rmsNormForward(kDefault, x.floats(), floatsOrNull(scale), y.floats(), rstd.floats(), r.rows, r.cols, eps);
  cuda::rmsNormBackward(kDefault, dy.floats(), x.floats(), floatsOrNull(scale), rstd.floats(), dx.floats(),
                        scale ? dscale.floats() : nullptr, r.rows, r.cols);
  std::vector<Tensor> out{dx, dscale};
  out.resize(std::min<size_t>(results, 2));
  return out;
}

namespace {

struct AttentionOperands {
  MaskedAttention masked{};
  bool fused = false;
  Shape outShape;

  AttentionShape kernelShape() const {
    AttentionShape s;
    s.batchHeads = masked.batch, s.queries = masked.queries, s.keys = masked.keys, s.headDim = masked.headDim;
    s.groups = masked.groups, s.scale = masked.scale, s.causal = masked.causal, s.dropout = masked.dropout;
    s.queryOffset = masked.keys - masked.queries;
    return s;
  }
};

AttentionOperands attentionOperands(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale,
                                    bool causal, const AttentionDropout &dropout) {
  requireFloat(q, "attention");
  requireFloat(k, "attention");
  requireFloat(v, "attention");
  shapes::AttentionDims d = shapes::attentionDims(q.shape, k.shape, v.shape);
  AttentionOperands a;
  MaskedAttention &m = a.masked;
  m.batch = d.batch, m.queries = d.queries, m.keys = d.keys, m.headDim = d.headDim, m.valueDim = d.valueDim;
  m.groups = d.groups, m.scale = scale, m.causal = causal, m.dropout = dropout;
  a.outShape = d.output;
  a.fused = !mask && m.headDim == m.valueDim;
  if (mask) {
    m.mask = broadcastMap(d.scores, mask->shape, "attention mask");
    m.booleanMask = mask->integer;
  }
  return a;
}

} // namespace

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask, float scale, bool causal,
                 const AttentionDropout &dropout) {
  AttentionOperands a = attentionOperands(q, k, v, mask, scale, causal, dropout);
  Tensor out = Tensor::zeros(a.outShape);
  if (a.fused) {
    Tensor lse = Tensor::zeros({a.masked.batch * a.masked.queries});
    cuda::attentionForward(kDefault, a.kernelShape(), q.floats(), k.floats(), v.floats(), out.floats(), lse.floats());
    return out;
  }
  int64_t rows = a.masked.batch * a.masked.queries;
  maskedAttentionForward<<<cuda::gridFor(rows, 64), 64>>>(
      a.masked, q.floats(), k.floats(), v.floats(), mask && !mask->integer ? mask->floats() : nullptr,
      mask && mask->integer ? mask->ints() : nullptr, out.floats());
  launched("attention (masked)");
  return out;
}

std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *mask,
                                  const Tensor &dOut, float scale, bool causal, const AttentionDropout &dropout) {
  AttentionOperands a = attentionOperands(q, k, v, mask, scale, causal, dropout);
  Tensor dq = Tensor::zeros(q.shape), dk = Tensor::zeros(k.shape), dv = Tensor::zeros(v.shape);
  if (a.fused) {
    Tensor o = Tensor::zeros(dOut.shape), lse = Tensor::zeros({a.masked.batch * a.masked.queries});
    AttentionShape s = a.kernelShape();
    cuda::attentionForward(kDefault, s, q.floats(), k.floats(), v.floats(), o.floats(), lse.floats());
    cuda::attentionBackward(kDefault, s, q.floats(), k.floats(), v.floats(), o.floats(), dOut.floats(), lse.floats(),
                            dq.floats(), dk.floats(), dv.floats());
    return {dq, dk, dv};
  }
  int64_t rows = a.masked.batch * a.masked.queries;
  maskedAttentionBackward<<<cuda::gridFor(rows, 64), 64>>>(
      a.masked, q.floats(), k.floats(), v.floats(), mask && !mask->integer ? mask->floats() : nullptr,
      mask && mask->integer ? mask->ints() : nullptr, dOut.floats(), dq.floats(), dk.floats(), dv.floats());
  launched("attention_grad (masked)");
  return {dq, dk, dv};
}

namespace {

struct LossRows {
  int64_t rows, classes, ignore, counted;
  Tensor loss, lse;
};

LossRows lossRows(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex, const char *op) {
  requireFloat(scores, op);
  shapes::requireLossOperands(scores.shape, labels.shape, labels.integer, op);
  LossRows r{scores.shape[0], scores.shape[1], ignoreIndex.value_or(std::numeric_limits<int64_t>::min()), 0,
             Tensor::zeros({scores.shape[0]}), Tensor::zeros({scores.shape[0]})};
  // Labels are few: check them on the host, as the host kernel does.
  host::Tensor hostLabels = download(labels);
  r.counted = shapes::countedLabels(hostLabels.ints.data(), r.rows, r.classes, r.ignore, op);
  cuda::crossEntropyForward(kDefault, scores.floats(), labels.ints(), r.loss.floats(), r.lse.floats(), r.rows,
                            r.classes, r.ignore);
  return r;
}

} // namespace

Tensor crossEntropy(const Tensor &scores, const Tensor &labels, std::optional<int64_t> ignoreIndex,
                    const std::string &reduction) {
  LossRows r = lossRows(scores, labels, ignoreIndex, "cross_entropy");
  if (reduction == "none")
    return r.loss;
  return Tensor::ofFloats({}, {float(shapes::reduceRowLosses(download(r.loss).floats, r.counted, reduction))});
}

Tensor crossEntropyGrad(const Tensor &scores, const Tensor &labels, const Tensor &dloss,
                        std::optional<int64_t> ignoreIndex, const std::string &reduction) {
  LossRows r = lossRows(scores, labels, ignoreIndex, "cross_entropy_grad");
  Floats perRow = shapes::rowGradientScales(download(dloss).floats, r.rows, r.counted, reduction);
  Tensor rowGrad = Tensor::ofFloats({r.rows}, perRow), out = Tensor::zeros(scores.shape);
  cuda::crossEntropyBackward(kDefault, scores.floats(), labels.ints(), r.lse.floats(), rowGrad.floats(), out.floats(),
                             r.rows, r.classes, r.ignore);
  return out;
}

// The negative log-likelihood picks one value per label: on the host, with
// the host kernel's checks and arithmetic, the operands moved each way.
Tensor nllLoss(const Tensor &logProbs, const Tensor &labels, const Tensor *weights, std::optional<int64_t> ignoreIndex,
               const std::string &reduction) {
  host::Tensor w = weights ? download(*weights) : host::Tensor();
  return upload(host::nllLoss(download(logProbs), download(labels), weights ? &w : nullptr, ignoreIndex, reduction));
}

Tensor nllLossGrad(const Shape &logProbs, const Tensor &labels, const Tensor *weights, const Tensor &dloss,
                   std::optional<int64_t> ignoreIndex, const std::string &reduction) {
  host::Tensor w = weights ? download(*weights) : host::Tensor();
  return upload(
      host::nllLossGrad(logProbs, download(labels), weights ? &w : nullptr, download(dloss), ignoreIndex, reduction));
}

Tensor geluGrad(const Tensor &x, const Tensor &dy, bool tanhApproximation) {
  Tensor out = Tensor::zeros(x.shape);
  cuda::geluBackward(kDefault, x.floats(), dy.floats(), out.floats(), x.elements(),
                     tanhApproximation ? GeluApproximation::Tanh : GeluApproximation::None);
  return out;
}

Tensor siluGrad(const Tensor &x, const Tensor &dy) {
  Tensor out = Tensor::zeros(x.shape);
  cuda::siluBackward(kDefault, x.floats(), dy.floats(), out.floats(), x.elements());
  return out;
}

std::vector<Tensor> dropout(const Tensor &x, float ratio, const DropoutKey &key) {
  requireFloat(x, "dropout");
  Tensor out = Tensor::zeros(x.shape), mask = Tensor::zeros(x.shape, true);
  int64_t n = x.elements();
  if (n)
    dropoutKernel<<<cuda::gridFor(n), 256>>>(x.floats(), out.floats(), mask.ints(), n, ratio, key);
  launched("dropout");
  return {out, mask};
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Tensor reshape(const Tensor &x, const Shape &out) {
  if (ix::product(out) != x.elements())
    fail("reshape", "cannot reshape " + host::describe(x.shape) + " into " + host::describe(out));
  Tensor r = x; // the same memory: results are never written in place
  r.shape = out;
  return r;
}

Tensor reshape(Tensor &&x, const Shape &out) {
  if (ix::product(out) != x.elements())
    fail("reshape", "cannot reshape " + host::describe(x.shape) + " into " + host::describe(out));
  Tensor r = std::move(x);
  r.shape = out;
  return r;
}

Tensor transpose(const Tensor &x, const Shape &perm) {
  Shape out(perm.size()), strides(perm.size()), in = ix::stridesOf(x.shape);
  for (size_t d = 0; d < perm.size(); ++d)
    out[d] = x.shape[size_t(perm[d])], strides[d] = in[size_t(perm[d])];
  Tensor r = Tensor::zeros(out, x.integer);
  gatherStrided(x, r, strided(out, strides, 0, "transpose"));
  return r;
}

Tensor broadcast(const Tensor &x, const Shape &out) {
  Tensor r = Tensor::zeros(out, x.integer);
  gatherStrided(x, r, broadcastMap(out, x.shape, "broadcast"));
  return r;
}

namespace {

/// The strided view of a slice of an `in`-shaped tensor with `out` elements.
Strided sliceMap(const Shape &in, const Shape &out, const Shape &starts, const Shape &steps, const char *op) {
  shapes::requireSliceInside(in, out, starts, steps, op);
  Shape inStrides = ix::stridesOf(in), strides(out.size());
  int64_t offset = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    offset += starts[d] * inStrides[d];
    strides[d] = steps[d] * inStrides[d];
  }
  return strided(out, strides, offset, op);
}

/// The block of `whole` at `offset` along `axis` with `part`'s shape.
Strided blockMap(const Shape &whole, const Shape &part, int64_t axis, int64_t offset, const char *op) {
  Shape strides = ix::stridesOf(whole);
  return strided(part, strides, offset * strides[size_t(axis)], op);
}

} // namespace

Tensor slice(const Tensor &x, const Shape &starts, const Shape &steps, const Shape &out) {
  Tensor r = Tensor::zeros(out, x.integer);
  gatherStrided(x, r, sliceMap(x.shape, out, starts, steps, "slice"));
  return r;
}

Tensor sliceGrad(const Tensor &dy, const Shape &starts, const Shape &steps, const Shape &inputShape) {
  requireFloat(dy, "slice_grad");
  Tensor r = Tensor::zeros(inputShape);
  scatterStrided(dy, r, sliceMap(inputShape, dy.shape, starts, steps, "slice_grad"), /*add=*/true);
  return r;
}

Tensor concat(const std::vector<const Tensor *> &inputs, int64_t axis, const Shape &out) {
  axis = axisOf(axis, out, "concat");
  Tensor r = Tensor::zeros(out, !inputs.empty() && inputs[0]->integer);
  int64_t offset = 0;
  for (const Tensor *in : inputs) {
    if (in->integer != r.integer)
      fail("concat", "operands of different kinds");
    scatterStrided(*in, r, blockMap(out, in->shape, axis, offset, "concat"), /*add=*/false);
    offset += in->shape[size_t(axis)];
  }
  if (offset != out[size_t(axis)])
    fail("concat", "operands cover " + std::to_string(offset) + " of " + std::to_string(out[size_t(axis)]));
  return r;
}

std::vector<Tensor> split(const Tensor &x, int64_t axis, const std::vector<Shape> &outs) {
  axis = axisOf(axis, x.shape, "split");
  std::vector<Tensor> results;
  int64_t offset = 0;
  for (const Shape &shape : outs) {
    if (offset + shape[size_t(axis)] > x.shape[size_t(axis)])
      fail("split", "parts larger than " + host::describe(x.shape));
    Tensor part = Tensor::zeros(shape, x.integer);
    gatherStrided(x, part, blockMap(x.shape, shape, axis, offset, "split"));
    offset += shape[size_t(axis)];
    results.push_back(part);
  }
  return results;
}

Tensor gather(const Tensor &data, const Tensor &indices, int64_t axis, const Shape &out) {
  if (!indices.integer)
    fail("gather", "takes integer indices");
  axis = axisOf(axis, data.shape, "gather");
  int64_t outer = ix::product(data.shape, 0, size_t(axis)), n = data.shape[size_t(axis)],
          inner = ix::product(data.shape, size_t(axis) + 1), count = indices.elements();
  Tensor r = Tensor::zeros(out, data.integer);
  if (r.elements() != outer * count * inner)
    fail("gather", "cannot take " + host::describe(indices.shape) + " from " + host::describe(data.shape));
  int *flag = badFlag();
  int64_t total = outer * count * inner;
  if (total) {
    if (data.integer)
      gatherRowsKernel<<<cuda::gridFor(total), 256>>>(data.ints(), indices.ints(), r.ints(), outer, n, count, inner,
                                                       flag);
    else
      gatherRowsKernel<<<cuda::gridFor(total), 256>>>(data.floats(), indices.ints(), r.floats(), outer, n, count,
                                                       inner, flag);
    launched("gather");
  }
  requireNoBadIndex(flag, "gather");
  return r;
}

Tensor gatherGrad(const Tensor &indices, const Tensor &dy, int64_t axis, const Shape &dataShape) {
  axis = axisOf(axis, dataShape, "gather_grad");
  int64_t outer = ix::product(dataShape, 0, size_t(axis)), n = dataShape[size_t(axis)],
          inner = ix::product(dataShape, size_t(axis) + 1), count = indices.elements();
  Tensor r = Tensor::zeros(dataShape);
  int *flag = badFlag();
  int64_t total = outer * count * inner;
  if (total) {
    gatherGradKernel<<<cuda::gridFor(total), 256>>>(indices.ints(), dy.floats(), r.floats(), outer, n, count, inner,
                                                    flag);
    launched("gather_grad");
  }
  requireNoBadIndex(flag, "gather_grad");
  return r;
}

Tensor reduce(ReduceKind kind, const Tensor &x, const Shape &axes, const Shape &out) {
  requireFloat(x, "reduce");
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[size_t(axisOf(a, x.shape, "reduce"))] = true;
  Shape strides = ix::stridesOf(x.shape), keptDims, keptStrides, redDims, redStrides;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    (reduced[d] ? redDims : keptDims).push_back(x.shape[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
  }
  Tensor r = Tensor::zeros(out);
  int64_t n = r.elements(), count = ix::product(redDims);
  Strided kept = strided(keptDims, keptStrides, 0, "reduce"), walk = strided(redDims, redStrides, 0, "reduce");
  // Few outputs over many elements (a bias gradient sums every token) would
  // leave most of the device idle with one thread per output.
  if (n && count >= 256 && n < 64 * 1024) {
    using cuda::ColumnSplit;
    bool lanesTakeOutputs = !keptStrides.empty() && keptStrides.back() == 1;
    int64_t perBlock = lanesTakeOutputs ? ColumnSplit::kLanes : ColumnSplit::kRowGroups;
    ColumnSplit split((n + perBlock - 1) / perBlock, count);
    cuda::StreamScratch partial(split.splits * n * int64_t(sizeof(double)), nullptr, "reduce");
    dim3 grid(unsigned(split.blocks), unsigned(split.splits)), block(ColumnSplit::kLanes, ColumnSplit::kRowGroups);
    reducePartialKernel<<<grid, block>>>(x.floats(), partial.as<double>(), n, kept, walk, count, split.chunk, int(kind),
                                         lanesTakeOutputs);
    launched("reduce (partial)");
    reduceFinishKernel<<<cuda::gridFor(n), 256>>>(partial.as<double>(), r.floats(), n, split.splits, count, int(kind));
  } else if (n) {
    reduceKernel<<<cuda::gridFor(n), 256>>>(x.floats(), r.floats(), n, kept, walk, count, int(kind));
  }
  launched("reduce");
  return r;
}

Tensor trilu(const Tensor &x, bool upper, int64_t k) {
  if (x.shape.size() < 2)
    fail("trilu", "takes a tensor of rank 2 or more");
  Tensor r = Tensor::zeros(x.shape, x.integer);
  int64_t n = x.elements(), rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  if (n)
    triluKernel<<<cuda::gridFor(n), 256>>>(x.integer ? nullptr : x.floats(), x.integer ? x.ints() : nullptr,
                                           x.integer ? nullptr : r.floats(), x.integer ? r.ints() : nullptr, n, rows,
                                           cols, upper, k);
  launched("trilu");
  return r;
}

} // namespace colossal::rt::device
