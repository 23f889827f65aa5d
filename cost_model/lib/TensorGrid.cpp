//===- TensorGrid.cpp - 2D, 2.5D and 3D tensor parallelism ---------------===//

#include "colossal/cost/TensorGrid.h"

namespace colossal::cost {

GridLinear gridLinear(TensorMode mode, int q, int depth, double x, double w, double y) {
  GridLinear g;
  double qq = double(q) * q;
  switch (mode) {
  case TensorMode::OneD:
    break;
  case TensorMode::TwoD:
  case TensorMode::TwoPointFiveD: {
    double d = mode == TensorMode::TwoD ? 1 : depth;
    double xBlock = x / (d * qq), wBlock = w / qq;
    g.forward = {{Collective::Broadcast, "tp_col", xBlock, q},
                 {Collective::Broadcast, "tp_row", wBlock, q}};
    g.backward = {{Collective::Broadcast, "tp_row", wBlock, q},
                  {Collective::Reduce, "tp_col", xBlock, q},
                  {Collective::Broadcast, "tp_col", xBlock, q},
                  {Collective::Reduce, "tp_row", wBlock, q}};
    if (mode == TensorMode::TwoPointFiveD && depth > 1)
      g.backward.push_back({Collective::AllReduce, "tp_depth", wBlock, 1});
    break;
  }
  case TensorMode::ThreeD:
    g.forward = {{Collective::AllGather, "tp_depth", x / qq, 1},
                 {Collective::AllGather, "tp_row", w / qq, 1},
                 {Collective::ReduceScatter, "tp_col", y / qq, 1}};
    g.backward = {{Collective::AllGather, "tp_col", y / qq, 1},
                  {Collective::ReduceScatter, "tp_depth", x / qq, 1},
                  {Collective::ReduceScatter, "tp_row", w / qq, 1}};
    break;
  }
  return g;
}

double gridVolume(const std::vector<GridCollective> &collectives, int groupSize) {
  double bytes = 0;
  for (const GridCollective &c : collectives)
    bytes += c.bytes * c.calls * busFactor(c.collective, groupSize);
  return bytes;
}

} // namespace colossal::cost
