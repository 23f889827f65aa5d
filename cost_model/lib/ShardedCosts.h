//===- ShardedCosts.h - an op's local work and tensor layouts under a sharding -*- C++ -*-===//
//
// The pieces of an op's cost that follow from its sharding alone: how much
// of its iteration space and tensors one rank holds, the layout it reads an
// operand in, the layout its operand gradients come out in, and the
// roofline. The estimator and the per-op sharding solver both cost ops with
// these, so the solver minimises exactly what the estimator reports.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LIB_SHARDEDCOSTS_H
#define COLOSSAL_COST_LIB_SHARDEDCOSTS_H

#include "colossal/cost/Communication.h"
#include "colossal/cost/Graph.h"

#include <algorithm>
#include <set>

namespace colossal::cost {

/// How many ways the sharding splits factor `f` of an op.
inline int64_t ways(const OpSharding &s, const Mesh &mesh, int f) {
  int64_t n = 1;
  for (int a : s[f])
    n *= mesh.axes[a].size;
  return n;
}

inline double localElements(const Op &op, const OpSharding &s, const Mesh &mesh,
                     const std::vector<std::vector<int>> &dims) {
  double n = 1;
  for (const auto &dim : dims)
    for (int f : dim)
      n *= double(op.factors[f].size) / double(ways(s, mesh, f));
  return n;
}

inline double fullElements(const Op &op, const std::vector<std::vector<int>> &dims) {
  double n = 1;
  for (const auto &dim : dims)
    for (int f : dim)
      n *= double(op.factors[f].size);
  return n;
}

/// The op's whole iteration space on one rank, over the whole space.
inline double localFraction(const Op &op, const OpSharding &s, const Mesh &mesh) {
  double fraction = 1;
  for (size_t f = 0; f < op.factors.size(); ++f)
    fraction /= double(ways(s, mesh, int(f)));
  return fraction;
}

inline bool indexes(const TensorUse &use, int f) {
  for (const auto &dim : use.dims)
    if (std::find(dim.begin(), dim.end(), f) != dim.end())
      return true;
  return false;
}

inline TensorSpec specOf(const Op &op, const OpSharding &s, const Mesh &mesh, const TensorUse &use,
                  bool withPartial) {
  TensorSpec spec;
  for (const auto &dim : use.dims) {
    std::vector<int> axes;
    for (int f : dim)
      for (int a : s[f])
        if (mesh.axes[a].size > 1)
          axes.push_back(a);
    spec.dims.push_back(axes);
  }
  if (withPartial)
    for (size_t f = 0; f < op.factors.size(); ++f)
      if (op.factors[f].kind == FactorKind::Reduction && !indexes(use, int(f)))
        for (int a : s[f])
          if (mesh.axes[a].size > 1)
            spec.partial.push_back(a);
  return spec;
}

/// Whether `use` (an output of `op`) is a pending sum on the mesh: a
/// reduction factor it lacks split over an axis of more than one rank
/// (specOf's `partial`, without building the spec).
inline bool pendingSum(const Op &op, const OpSharding &s, const Mesh &mesh, const TensorUse &use) {
  for (size_t f = 0; f < op.factors.size(); ++f)
    if (op.factors[f].kind == FactorKind::Reduction && !indexes(use, int(f)))
      for (int a : s[f])
        if (mesh.axes[a].size > 1)
          return true;
  return false;
}

/// The gradient of an operand: laid out like the operand, and a partial sum
/// over every axis that splits a parallel factor the operand does not have
/// (each rank computed a different part of the result from it). Splitting a
/// reduction factor the operand lacks (a row-parallel layer's bias) leaves
/// its gradient whole.
inline TensorSpec gradientSpecOf(const Op &op, const OpSharding &s, const Mesh &mesh,
                          const TensorUse &use) {
  TensorSpec spec = specOf(op, s, mesh, use, false);
  std::set<int> present;
  for (const auto &dim : spec.dims)
    present.insert(dim.begin(), dim.end());
  for (size_t f = 0; f < op.factors.size(); ++f)
    if (!indexes(use, int(f)) && op.factors[f].kind == FactorKind::Parallel)
      for (int a : s[f])
        if (mesh.axes[a].size > 1 && !present.count(a) &&
            std::find(spec.partial.begin(), spec.partial.end(), a) == spec.partial.end())
          spec.partial.push_back(a);
  return spec;
}

/// Which values carry a gradient: trainable parameters and what is
/// computed from them (not the data, masks made from it, or integers).
inline std::vector<char> valuesNeedingGradient(const Graph &graph) {
  std::vector<char> needs(graph.values.size(), 0);
  for (size_t v = 0; v < graph.values.size(); ++v)
    needs[v] = graph.values[v].isParameter && !graph.values[v].frozen;
  auto integer = [&](int v) {
    DType t = graph.values[size_t(v)].dtype;
    return t == DType::I64 || t == DType::I32 || t == DType::I8;
  };
  for (const Op &op : graph.ops)
    for (const TensorUse &in : op.inputs)
      if (needs[size_t(in.value)])
        for (const TensorUse &out : op.outputs)
          needs[size_t(out.value)] = !integer(out.value);
  return needs;
}

/// A loss whose rows the sequence axis `sp` splits (each rank its tokens;
/// runtime SequenceParallel.h) sums over the axis, forward, the rows'
/// losses and counted labels (two floats), and backward the count again (a
/// mean's divisor).
constexpr double kLossSumForwardBytes = 8, kLossSumBackwardBytes = 4;
inline bool sumsLossOverSequence(const Op &op, const OpSharding &s, const Mesh &mesh, int sp) {
  if (op.kind != OpKind::Loss || sp < 0 || mesh.axes[size_t(sp)].size <= 1)
    return false;
  for (size_t f = 0; f < op.factors.size(); ++f)
    if (op.factors[f].kind != FactorKind::Whole && std::find(s[f].begin(), s[f].end(), sp) != s[f].end())
      return true;
  return false;
}

inline double roofline(double flops, double bytes, double rate, double bandwidth) {
  return std::max(rate > 0 ? flops / rate : 0.0, bandwidth > 0 ? bytes / bandwidth : 0.0);
}

} // namespace colossal::cost

#endif // COLOSSAL_COST_LIB_SHARDEDCOSTS_H
