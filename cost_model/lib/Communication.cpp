//===- Communication.cpp - collectives and resharding ---------------------===//

#include "colossal/cost/Communication.h"
#include "colossal/cost/Resharding.h"

#include <algorithm>
#include <unordered_map>

namespace colossal::cost {

const char *nameOf(Collective c) {
  switch (c) {
  case Collective::AllReduce: return "all_reduce";
  case Collective::AllGather: return "all_gather";
  case Collective::ReduceScatter: return "reduce_scatter";
  case Collective::AllToAll: return "all_to_all";
  case Collective::Broadcast: return "broadcast";
  case Collective::Reduce: return "reduce";
  case Collective::SendRecv: return "send_recv";
  }
  return "?";
}

double busFactor(Collective c, int n) {
  if (n <= 1)
    return c == Collective::SendRecv ? 1.0 : 0.0;
  switch (c) {
  case Collective::AllReduce: return 2.0 * (n - 1) / n;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll: return double(n - 1) / n;
  case Collective::Broadcast:
  case Collective::Reduce:
  case Collective::SendRecv: return 1.0;
  }
  return 1.0;
}

/// A flat collective on one kind of link.
static double flatTime(Collective c, double bytes, int n, const Link &link) {
  if (n <= 1 && c != Collective::SendRecv)
    return 0;
  // The bus bandwidth table is indexed by the message size per rank pair,
  // which nccl-tests reports as the full size.
  return link.latency + bytes / link.busBandwidthAt(bytes) * busFactor(c, n);
}

double collectiveTime(Collective c, double bytes, int n, int perNode, const Cluster &cluster) {
  if (n <= 1 && c != Collective::SendRecv)
    return 0;
  perNode = std::clamp(perNode, 1, n);
  if (perNode == n)
    return flatTime(c, bytes, n, cluster.intraNode);
  if (perNode == 1 || c == Collective::AllToAll || c == Collective::Broadcast ||
      c == Collective::Reduce || c == Collective::SendRecv)
    return flatTime(c, bytes, n, cluster.interNode);
  int nodes = n / perNode;
  switch (c) {
  case Collective::AllReduce:
    return flatTime(Collective::ReduceScatter, bytes, perNode, cluster.intraNode) +
           flatTime(Collective::AllReduce, bytes / perNode, nodes, cluster.interNode) +
           flatTime(Collective::AllGather, bytes, perNode, cluster.intraNode);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    return flatTime(c, bytes / perNode, nodes, cluster.interNode) +
           flatTime(c, bytes, perNode, cluster.intraNode);
  default:
    return flatTime(c, bytes, n, cluster.interNode);
  }
}

double collectiveTime(Collective c, double bytes, const MeshAxis &axis, const Cluster &cluster) {
  return collectiveTime(c, bytes, axis.size, axis.perNode, cluster);
}

/// Whether both layouts split every dimension by the same axes (of more
/// than one rank), whatever their nesting.
static bool sameSplits(const TensorSpec &from, const TensorSpec &to) {
  for (size_t d = 0; d < std::max(from.dims.size(), to.dims.size()); ++d) {
    static const std::vector<int> none;
    const std::vector<int> &x = d < from.dims.size() ? from.dims[d] : none;
    const std::vector<int> &y = d < to.dims.size() ? to.dims[d] : none;
    if (x.size() != y.size() || !std::is_permutation(x.begin(), x.end(), y.begin()))
      return false;
  }
  return true;
}

double reshard(const TensorSpec &from, const TensorSpec &to, double fullBytes, const Mesh &mesh,
               const Cluster &cluster, std::vector<CommEvent> &events) {
  // Most edges need nothing: no pending sum, the same axes on every
  // dimension (in any order, which the partitioner matches).
  if (from.partial.empty() && sameSplits(from, to))
    return 0;
  // The search prices the same few pairs of layouts on the same mesh over
  // and over: their steps (sizes as fractions of the value) are kept.
  struct Step {
    Collective collective;
    int axis;
    double fraction;
  };
  static thread_local std::unordered_map<std::string, std::vector<Step>> known;
  std::string key;
  key.reserve(64);
  auto put = [&](const std::vector<int> &axes) {
    for (int a : axes)
      key += char(a + 1);
    key += '\0';
  };
  for (const auto &dim : from.dims)
    put(dim);
  put(from.partial);
  key += '/';
  for (const auto &dim : to.dims)
    put(dim);
  for (const MeshAxis &axis : mesh.axes)
    key.append(reinterpret_cast<const char *>(&axis.size), sizeof axis.size);
  auto found = known.find(key);
  if (found == known.end()) {
    std::vector<int> sizes;
    for (const MeshAxis &axis : mesh.axes)
      sizes.push_back(axis.size);
    // The consumer's layout as the cost model sees it: which axes split
    // each dimension (their nesting is the partitioner's to choose, so the
    // producer's is kept), and every pending sum resolved.
    TensorSpec wanted = alignedTo(from, to);
    wanted.partial.clear();
    std::vector<Step> steps;
    for (const ReshardStep &step : planResharding(from, wanted, sizes, 1.0).steps)
      if (Collective c; collectiveOf(step.kind, c))
        steps.push_back({c, step.axis, step.bytes});
    found = known.emplace(std::move(key), std::move(steps)).first;
  }
  double seconds = 0;
  for (const Step &step : found->second) {
    double bytes = step.fraction * fullBytes;
    double t = collectiveTime(step.collective, bytes, mesh.axes[size_t(step.axis)], cluster);
    events.push_back({step.collective, step.axis, bytes, t});
    seconds += t;
  }
  return seconds;
}

} // namespace colossal::cost
