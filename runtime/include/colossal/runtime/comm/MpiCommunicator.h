//===- MpiCommunicator.h - the host backend over MPI -------------*- C++ -*-===//
//
// MPI starts the job (every backend bootstraps through it), and on the host
// target it also carries the collectives. Collectives are posted as
// non-blocking MPI operations and waited on with a deadline: a peer that died
// or went another way turns into an Error naming the collective and its
// group instead of a hang. bf16 and f16 reductions run through user-defined
// MPI operations that sum in float.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_MPICOMMUNICATOR_H
#define COLOSSAL_RUNTIME_MPICOMMUNICATOR_H

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/comm/Launch.h"

#include <memory>

namespace colossal::rt {

/// MPI for the life of the program: initialised on construction (thread
/// support "serialized": any thread may communicate, one at a time),
/// finalised on destruction. `abort` ends every rank of the job; use it when
/// a rank cannot go on.
class MpiSession {
public:
  MpiSession(int *argc, char ***argv);
  ~MpiSession();
  MpiSession(const MpiSession &) = delete;
  MpiSession &operator=(const MpiSession &) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  const LaunchInfo &launch() const { return launch_; }
  /// Whether the MPI library granted "serialized": a second thread may
  /// drive the communicators while the first does not.
  bool threadsMayCommunicate() const { return threadsMayCommunicate_; }

  [[noreturn]] static void abort(int code);

private:
  int rank_ = 0;
  int worldSize_ = 1;
  bool threadsMayCommunicate_ = false;
  LaunchInfo launch_;
};

class MpiCommunicator : public Communicator {
public:
  /// All ranks of the job.
  static std::unique_ptr<MpiCommunicator> world(CommCounters *counters);
  ~MpiCommunicator() override;

  /// Collective over this communicator: ranks with the same `color` form a
  /// group, ordered by `key`. `worldRanks` lists the new group's world ranks.
  std::unique_ptr<MpiCommunicator> split(int color, int key, const std::string &axis,
                                         std::vector<int> worldRanks);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// The MPI_Comm, as an opaque handle (MPI stays out of this header).
  void *handle() const { return comm_; }

protected:
  void doAllReduce(void *data, DType dtype, int64_t count, ReduceOp op) override;
  void doAllGather(const void *send, void *recv, DType dtype, int64_t count) override;
  void doReduceScatter(const void *send, void *recv, DType dtype, int64_t count, ReduceOp op) override;
  void doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) override;
  void doBroadcast(void *data, DType dtype, int64_t count, int root) override;
  void doReduce(void *data, DType dtype, int64_t count, int root, ReduceOp op) override;
  void doSendRecv(const std::vector<PeerTransfer> &transfers) override;
  std::unique_ptr<PendingSend> doPostSend(const void *data, DType dtype, int64_t count, int peer, int tag) override;
  void doReceive(void *data, DType dtype, int64_t count, int peer, int tag) override;
  void doBarrier() override;
  void doIdleBarrier() override;

private:
  class MpiPendingSend;
  MpiCommunicator(void *comm, std::string axis, std::vector<int> worldRanks, CommCounters *counters);
  /// Tests the requests until they complete, yielding the core between
  /// tests, or sleeping `sleepSeconds` when it is positive.
  void wait(void *requests, int count, const char *collective, double sleepSeconds = 0);

  void *comm_;
  int rank_ = 0;
  int size_ = 1;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_MPICOMMUNICATOR_H
