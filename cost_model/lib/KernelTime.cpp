//===- KernelTime.cpp - how long one op's kernels take on one rank --------===//

#include "KernelTime.h"
#include "ShardedCosts.h"

#include <algorithm>

namespace colossal::cost {
namespace {

/// A contraction's matrices: `batch` products of [m, k] x [k, n].
struct GemmShape {
  double batch = 1, m = 1, n = 1, k = 1;
};

/// The shape of a two-operand contraction from its factors: m indexes the
/// first operand and the result, n the second and the result, k both
/// operands and not the result, batch all three. Nullopt when its FLOPs
/// are not 2 batch m n k (a convolution, a three-operand einsum).
std::optional<GemmShape> gemmShapeOf(const Op &op, const OpSharding &s, const Mesh &mesh, double rowShare,
                                     double forwardFlops) {
  if (op.inputs.size() < 2 || op.outputs.empty())
    return std::nullopt;
  GemmShape g;
  for (size_t f = 0; f < op.factors.size(); ++f) {
    double local = double(op.factors[f].size) / double(ways(s, mesh, int(f)));
    bool a = indexes(op.inputs[0], int(f)), b = indexes(op.inputs[1], int(f)), c = indexes(op.outputs[0], int(f));
    if (a && b && !c)
      g.k *= local;
    else if (a && c && !b)
      g.m *= local;
    else if (b && c && !a)
      g.n *= local;
    else
      g.batch *= local;
  }
  g.m /= rowShare;
  double flops = 2 * g.batch * g.m * g.n * g.k;
  if (forwardFlops <= 0 || std::abs(flops / forwardFlops - 1) > 0.01)
    return std::nullopt;
  return g;
}

/// The factor an attention's keys index and neither its queries nor its
/// result do (the key length), or -1.
int keyFactorOf(const Op &op) {
  if (op.inputs.size() < 2 || op.outputs.empty())
    return -1;
  for (size_t f = 0; f < op.factors.size(); ++f)
    if (indexes(op.inputs[1], int(f)) && !indexes(op.inputs[0], int(f)) && !indexes(op.outputs[0], int(f)))
      return int(f);
  return -1;
}

} // namespace

KernelKind kernelKindOf(const Op &op) {
  switch (op.kind) {
  case OpKind::Norm:
    return KernelKind::Norm;
  case OpKind::Softmax:
    return KernelKind::Softmax;
  case OpKind::Loss:
    return KernelKind::Loss;
  case OpKind::Embedding:
    return KernelKind::Embedding;
  default:
    return op.transcendental ? KernelKind::Transcendental : KernelKind::Elementwise;
  }
}

KernelSeconds kernelSeconds(const Graph &graph, const Op &op, const OpSharding &s, const Mesh &mesh,
                            const Cluster &cluster, double bytes, double rowShare, int ringRanks) {
  DType dtype = op.outputs.empty() ? DType::BF16 : graph.values[op.outputs[0].value].dtype;
  double fraction = localFraction(op, s, mesh) / rowShare;
  // A ring rank's queries meet every rank's block of keys in turn, not only
  // the block it holds: where the keys' factor is split over the ring, the
  // rank's work is all the blocks.
  bool ringing = ringRanks > 1 && op.attentionCore;
  int keyFactor = op.attentionCore ? keyFactorOf(op) : -1;
  if (ringing && keyFactor >= 0)
    fraction *= double(ways(s, mesh, keyFactor));
  double forwardFlops = op.forwardFlops * fraction, backwardFlops = op.backwardFlops * fraction;
  const KernelRates &rates = cluster.kernels;
  bool gemm = op.kind == OpKind::MatMul;
  KernelSeconds t;
  // The roofline, at peak rates scaled by GEMM efficiency by FLOPs per call.
  auto roofline = [&] {
    t.forward =
        cost::roofline(forwardFlops, bytes, gemm ? cluster.gemmRate(dtype, forwardFlops) : cluster.peak(DType::F32),
                       cluster.memoryBandwidth);
    t.backward = cost::roofline(backwardFlops, 2 * bytes,
                                gemm ? cluster.gemmRate(dtype, backwardFlops / 2) : cluster.peak(DType::F32),
                                cluster.memoryBandwidth);
  };
  if (rates.empty()) {
    roofline();
    return t;
  }
  double speedup = rates.speedupWhenBusy(gemm ? rates.aloneSpeedupGemm : rates.aloneSpeedupStreaming, mesh.devices(),
                                         cluster.gpusPerNode);
  double peak = cluster.peak(dtype);
  std::optional<GemmShape> shape;
  bool ring = ringing && !rates.ringAttentionForward.empty();
  // A ring computes its blocks whole (the plain curve where it has none of
  // its own) and skips only those the causal mask hides: the imbalance below.
  bool causal = !ringing && op.causal && !rates.causalAttentionForward.empty();
  bool fusedAttention = op.attentionCore && (ring || causal || !rates.attentionForward.empty());
  if (fusedAttention && !gemm) {
    // The fused kernel's softmax and dropout: its time, priced on the score
    // and context products at the kernel's measured rate, covers them.
    t.forward = t.backward = 0;
  } else if (gemm && fusedAttention) {
    const std::vector<CurvePoint> &forward = ring     ? rates.ringAttentionForward
                                             : causal ? rates.causalAttentionForward
                                                      : rates.attentionForward;
    const std::vector<CurvePoint> &backward = ring     ? rates.ringAttentionBackward
                                              : causal ? rates.causalAttentionBackward
                                                       : rates.attentionBackward;
    // The curves are by the length of a block of keys.
    double keys = keyFactor >= 0 ? double(op.factors[size_t(keyFactor)].size) / double(ways(s, mesh, keyFactor))
                                 : forward.back().size;
    // A causal ring is unbalanced: the last rank's queries see every block
    // before its own, P - 1/2 of the P blocks, and the step waits for it.
    double busiest = ringing && op.causal ? (ringRanks - 0.5) / ringRanks : 1.0;
    t.forward = busiest * forwardFlops / (peak * interpolate(forward, keys));
    t.backward = backwardFlops > 0 ? busiest * backwardFlops / (peak * interpolate(backward, keys)) : 0;
  } else if (gemm && !rates.gemm.empty() && (shape = gemmShapeOf(op, s, mesh, rowShare, forwardFlops))) {
    auto seconds = [&](double m, double n, double k) {
      return shape->batch * 2 * m * n * k / (peak * rates.gemmEfficiency(m, n, k));
    };
    t.forward = seconds(shape->m, shape->n, shape->k);
    // dA = dC B^T ([m, n] x [n, k]) and dB = A^T dC ([k, m] x [m, n]),
    // scaled when only one operand takes a gradient.
    double both = seconds(shape->m, shape->k, shape->n) + seconds(shape->k, shape->n, shape->m);
    t.backward = both * backwardFlops / (2 * forwardFlops);
  } else if (const StreamingRate *rate = gemm ? nullptr : rates.streamingOf(kernelKindOf(op))) {
    double forwardBytes = bytes, backwardBytes = bytes;
    if (op.kind == OpKind::Embedding && op.inputs.size() >= 1 && !op.outputs.empty()) {
      // A lookup reads the rows it returns; its backward makes the whole
      // table's gradient and adds the rows into it.
      auto local = [&](const TensorUse &use) {
        return localElements(op, s, mesh, use.dims) * bytesOf(graph.values[size_t(use.value)].dtype);
      };
      double rows = local(op.outputs[0]) / rowShare;
      forwardBytes = 2 * rows;
      backwardBytes = local(op.inputs[0]) + 2 * rows;
    }
    t.forward = rate->forward.seconds(forwardBytes);
    t.backward = backwardFlops > 0 ? rate->backward.seconds(backwardBytes) : 0;
  } else {
    roofline();
  }
  t.forward /= speedup;
  t.backward /= speedup;
  return t;
}

} // namespace colossal::cost
