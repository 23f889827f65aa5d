//===- Communication.cpp - collectives and resharding ---------------------===//

#include "colossal/cost/Communication.h"

#include <algorithm>

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

static bool contains(const std::vector<int> &list, int x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

static int dimOf(const TensorSpec &spec, int axis) {
  for (size_t d = 0; d < spec.dims.size(); ++d)
    if (contains(spec.dims[d], axis))
      return int(d);
  return -1;
}

double reshard(const TensorSpec &from, const TensorSpec &to, double fullBytes, const Mesh &mesh,
               const Cluster &cluster, std::vector<CommEvent> &events) {
  TensorSpec current = from;
  current.dims.resize(to.dims.size());
  auto localBytes = [&] {
    double bytes = fullBytes;
    for (const auto &dim : current.dims)
      for (int a : dim)
        bytes /= mesh.axes[a].size;
    return bytes;
  };
  double seconds = 0;
  auto emit = [&](Collective c, int axis, double bytes) {
    double t = collectiveTime(c, bytes, mesh.axes[axis], cluster);
    events.push_back({c, axis, bytes, t});
    seconds += t;
  };
  // Pending partial sums: reduce, scattering straight into the split the
  // consumer wants when it wants this axis on a dimension.
  for (int axis : current.partial) {
    if (mesh.axes[axis].size == 1)
      continue;
    int wanted = dimOf(to, axis);
    if (wanted >= 0 && dimOf(current, axis) < 0) {
      emit(Collective::ReduceScatter, axis, localBytes());
      current.dims[wanted].push_back(axis);
    } else {
      emit(Collective::AllReduce, axis, localBytes());
    }
  }
  current.partial.clear();
  // Splits the consumer does not want where they are: move or gather.
  for (size_t d = 0; d < current.dims.size(); ++d) {
    for (size_t i = 0; i < current.dims[d].size();) {
      int axis = current.dims[d][i];
      if (contains(to.dims[d], axis) || mesh.axes[axis].size == 1) {
        ++i;
        continue;
      }
      int wanted = dimOf(to, axis);
      if (wanted >= 0) {
        emit(Collective::AllToAll, axis, localBytes());
        current.dims[d].erase(current.dims[d].begin() + i);
        current.dims[wanted].push_back(axis);
      } else {
        current.dims[d].erase(current.dims[d].begin() + i);
        emit(Collective::AllGather, axis, localBytes());
      }
    }
  }
  // Splits the consumer wants and the producer did not make are local slices.
  return seconds;
}

} // namespace colossal::cost
