//===- NcclCommunicator.h - the GPU backend over NCCL -------------*- C++ -*-===//
//
// Only in the CUDA build. The world communicator is created from a unique id
// that rank 0 draws and broadcasts over MPI; mesh-axis groups come from
// ncclCommSplit. Communicators are non-blocking (NCCL's `blocking = 0`), so
// initialisation and every collective can be waited on with a deadline: a
// collective still running after the timeout, or an asynchronous NCCL error,
// aborts the communicator (ncclCommAbort) and becomes an Error naming the
// collective and the group, instead of a hang.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_NCCLCOMMUNICATOR_H
#define COLOSSAL_RUNTIME_NCCLCOMMUNICATOR_H

#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"

#include <memory>

namespace colossal::rt {

class NcclCommunicator : public Communicator {
public:
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// The stream collectives run on (cudaStream_t).
  void *stream() const { return stream_; }
  /// Ends every outstanding operation; the communicator is unusable after.
  void abort();

  /// Collective: ranks with the same color form a group, ordered by key.
  std::unique_ptr<NcclCommunicator> split(int color, int key, const std::string &axis, std::vector<int> worldRanks);

protected:
  void doAllReduce(void *data, DType dtype, int64_t count, ReduceOp op) override;
  void doAllGather(const void *send, void *recv, DType dtype, int64_t count) override;
  void doReduceScatter(const void *send, void *recv, DType dtype, int64_t count, ReduceOp op) override;
  void doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) override;
  void doBroadcast(void *data, DType dtype, int64_t count, int root) override;
  void doReduce(void *data, DType dtype, int64_t count, int root, ReduceOp op) override;
  void doSendRecv(const std::vector<PeerTransfer> &transfers) override;
  void doBarrier() override;
  void *allocateStaging(int64_t bytes) override;
  void freeStaging(void *data) override;
  void pack(const Buffer &from, void *to) override;
  void unpack(const void *from, const Buffer &to) override;

private:
  friend struct NcclSetup;
  NcclCommunicator(void *comm, std::string axis, std::vector<int> worldRanks, CommCounters *counters);
  /// Waits for NCCL's pending state and the stream, with the timeout.
  void settle(int status, const char *call);
  void complete(const char *collective);

  void *comm_ = nullptr;
  void *stream_ = nullptr;
  int rank_ = 0, size_ = 1;
  bool aborted_ = false;
};

struct NcclSetup {
  std::unique_ptr<NcclCommunicator> world;

  /// Collective over `mpiWorld`: selects the GPU by local rank and creates
  /// the NCCL world communicator.
  static NcclSetup create(MpiCommunicator &mpiWorld, int localRank, CommCounters *counters);
  /// One NCCL communicator per group of every mesh axis.
  static ProcessGroups groups(const MeshShape &mesh, NcclCommunicator &world, CommCounters *counters);
};

// Device buffers for the conformance suite.
void *ncclTestAllocate(int64_t bytes);
void ncclTestFree(void *data);
void ncclTestToDevice(void *device, const void *host, int64_t bytes);
void ncclTestToHost(void *host, const void *device, int64_t bytes);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_NCCLCOMMUNICATOR_H
