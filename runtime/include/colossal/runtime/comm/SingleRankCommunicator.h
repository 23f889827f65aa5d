//===- SingleRankCommunicator.h - a group of one ----------------*- C++ -*-===//
//
// A job of one rank needs no launcher: every collective over one rank is a
// copy (or nothing). Single-rank programs and unit tests use this instead of
// MPI, through the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_SINGLERANKCOMMUNICATOR_H
#define COLOSSAL_RUNTIME_SINGLERANKCOMMUNICATOR_H

#include "colossal/runtime/comm/Communicator.h"

namespace colossal::rt {

class SingleRankCommunicator : public Communicator {
public:
  explicit SingleRankCommunicator(std::string axis = "world", CommCounters *counters = nullptr)
      : Communicator(std::move(axis), {0}, counters) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }

protected:
  void doAllReduce(void *, DType, int64_t, ReduceOp) override {}
  void doAllGather(const void *send, void *recv, DType dtype, int64_t count) override;
  void doReduceScatter(const void *send, void *recv, DType dtype, int64_t count, ReduceOp) override;
  void doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) override;
  void doBroadcast(void *, DType, int64_t, int) override {}
  void doReduce(void *, DType, int64_t, int, ReduceOp) override {}
  void doSendRecv(const std::vector<PeerTransfer> &transfers) override;
  void doBarrier() override {}
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_SINGLERANKCOMMUNICATOR_H
