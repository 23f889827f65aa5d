//===- MpiCommunicator.cpp ------------------------------------------------===//

#include "colossal/runtime/comm/MpiCommunicator.h"

#include "colossal/runtime/Error.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <thread>

namespace colossal::rt {

namespace {

[[noreturn]] void mpiFail(const std::string &call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    length = 0;
  fail(call, length ? std::string(text, size_t(length)) : "MPI error " + std::to_string(code));
}

void check(int code, const std::string &call) {
  if (code != MPI_SUCCESS)
    mpiFail(call, code);
}

MPI_Comm asComm(void *handle) { return static_cast<MPI_Comm>(handle); }

// Sums and maxima of 16-bit floats, computed in float.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), bool IsMax>
void reduce16(void *in, void *inout, int *length, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = ToFloat(a[i]), y = ToFloat(b[i]);
    b[i] = FromFloat(IsMax ? (x > y ? x : y) : x + y);
  }
}

struct CustomOps {
  MPI_Op bf16Sum, bf16Max, f16Sum, f16Max;
};
CustomOps *customOps = nullptr;

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::BF16:
  case DType::F16:
  case DType::U16:
    return MPI_UINT16_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::U8:
    return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpiOp(DType dtype, ReduceOp op, const std::string &what) {
  bool sum = op == ReduceOp::Sum;
  if (dtype == DType::BF16)
    return sum ? customOps->bf16Sum : customOps->bf16Max;
  if (dtype == DType::F16)
    return sum ? customOps->f16Sum : customOps->f16Max;
  if (dtype == DType::U16 && sum)
    fail(what, "sums of u16 would overflow silently; reduce a wider type");
  return sum ? MPI_SUM : MPI_MAX;
}

int checkedCount(int64_t count, const std::string &what) {
  if (count > INT_MAX)
    fail(what, std::to_string(count) + " elements exceed MPI's count limit; split the buffer");
  return int(count);
}

} // namespace

MpiSession::MpiSession(int *argc, char ***argv) {
  launch_ = detectLaunch();
  setErrorRank(launch_.rank);
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  // Serialized: a second thread may communicate while the first computes
  // (the trainer's overlapped gradient reduction), never both at once.
  int provided = MPI_THREAD_SINGLE;
  if (!initialised)
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  else
    check(MPI_Query_thread(&provided), "MPI_Query_thread");
  threadsMayCommunicate_ = provided >= MPI_THREAD_SERIALIZED;
  // Errors come back as codes and become Errors naming the call, rather than
  // MPI's default of aborting without context.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &worldSize_), "MPI_Comm_size");
  setErrorRank(rank_);
  if (launch_.launcher != "single" && launch_.worldSize != worldSize_)
    fail("MPI_Init", "the launcher says " + std::to_string(launch_.worldSize) +
                         " ranks but MPI has " + std::to_string(worldSize_));
  if (!customOps) {
    customOps = new CustomOps;
    MPI_Op_create(&reduce16<bf16ToFloat, floatToBf16, false>, 1, &customOps->bf16Sum);
    MPI_Op_create(&reduce16<bf16ToFloat, floatToBf16, true>, 1, &customOps->bf16Max);
    MPI_Op_create(&reduce16<f16ToFloat, floatToF16, false>, 1, &customOps->f16Sum);
    MPI_Op_create(&reduce16<f16ToFloat, floatToF16, true>, 1, &customOps->f16Max);
  }
}

MpiSession::~MpiSession() {
  if (customOps) {
    MPI_Op_free(&customOps->bf16Sum);
    MPI_Op_free(&customOps->bf16Max);
    MPI_Op_free(&customOps->f16Sum);
    MPI_Op_free(&customOps->f16Max);
    delete customOps;
    customOps = nullptr;
  }
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised)
    MPI_Finalize();
}

void MpiSession::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(CommCounters *counters) {
  MPI_Comm comm;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int size = 0;
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<int> ranks(size_t(size), 0);
  for (int i = 0; i < size; ++i)
    ranks[size_t(i)] = i;
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(comm, "world", ranks, counters));
}

MpiCommunicator::MpiCommunicator(void *comm, std::string axis, std::vector<int> worldRanks,
                                 CommCounters *counters)
    : Communicator(std::move(axis), std::move(worldRanks), counters), comm_(comm) {
  check(MPI_Comm_rank(asComm(comm_), &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(asComm(comm_), &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) {
    MPI_Comm comm = asComm(comm_);
    MPI_Comm_free(&comm);
  }
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key, const std::string &axis,
                                                        std::vector<int> worldRanks) {
  MPI_Comm comm;
  check(MPI_Comm_split(asComm(comm_), color, key, &comm), "MPI_Comm_split for axis " + axis);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto result = std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, axis, std::move(worldRanks), counters()));
  result->setTimeout(timeout());
  return result;
}

void MpiCommunicator::wait(void *requestArray, int count, const char *collective, double sleepSeconds) {
  auto *requests = static_cast<MPI_Request *>(requestArray);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout());
  // Non-blocking collectives advance only inside MPI calls, so keep testing
  // (as a blocking call would), yielding the core between tests so that
  // oversubscribed ranks let the peers they wait for run.
  for (int polls = 1;; ++polls) {
    int done = 0;
    check(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE), describe(collective));
    if (done)
      return;
    if ((sleepSeconds > 0 || polls % 256 == 0) && std::chrono::steady_clock::now() > deadline)
      fail(describe(collective),
           "did not complete within " + std::to_string(int(timeout())) +
               " s: a rank of the group stopped, died or took a different path "
               "(COLOSSAL_COLLECTIVE_TIMEOUT sets the limit)");
    if (sleepSeconds > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(sleepSeconds));
    else
      std::this_thread::yield();
  }
}

void MpiCommunicator::doAllReduce(void *data, DType dtype, int64_t count, ReduceOp op) {
  std::string what = describe("all_reduce");
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, checkedCount(count, what), mpiType(dtype),
                       mpiOp(dtype, op, what), asComm(comm_), &request),
        "MPI_Iallreduce: " + what);
  wait(&request, 1, "all_reduce");
}

void MpiCommunicator::doAllGather(const void *send, void *recv, DType dtype, int64_t count) {
  std::string what = describe("all_gather");
  MPI_Request request;
  checkedCount(count * size_, what);
  check(MPI_Iallgather(send, checkedCount(count, what), mpiType(dtype), recv, int(count),
                       mpiType(dtype), asComm(comm_), &request),
        "MPI_Iallgather: " + what);
  wait(&request, 1, "all_gather");
}

void MpiCommunicator::doReduceScatter(const void *send, void *recv, DType dtype, int64_t count,
                                      ReduceOp op) {
  std::string what = describe("reduce_scatter");
  MPI_Request request;
  checkedCount(count * size_, what);
  check(MPI_Ireduce_scatter_block(send, recv, checkedCount(count, what), mpiType(dtype),
                                  mpiOp(dtype, op, what), asComm(comm_), &request),
        "MPI_Ireduce_scatter_block: " + what);
  wait(&request, 1, "reduce_scatter");
}

void MpiCommunicator::doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) {
  std::string what = describe("all_to_all");
  MPI_Request request;
  checkedCount(countPerRank * size_, what);
  int count = checkedCount(countPerRank, what);
  check(MPI_Ialltoall(send, count, mpiType(dtype), recv, count, mpiType(dtype), asComm(comm_),
                      &request),
        "MPI_Ialltoall: " + what);
  wait(&request, 1, "all_to_all");
}

void MpiCommunicator::doBroadcast(void *data, DType dtype, int64_t count, int root) {
  std::string what = describe("broadcast");
  MPI_Request request;
  check(MPI_Ibcast(data, checkedCount(count, what), mpiType(dtype), root, asComm(comm_), &request),
        "MPI_Ibcast: " + what);
  wait(&request, 1, "broadcast");
}

void MpiCommunicator::doReduce(void *data, DType dtype, int64_t count, int root, ReduceOp op) {
  std::string what = describe("reduce");
  MPI_Request request;
  // The root reduces into its own buffer; the others only send theirs.
  check(MPI_Ireduce(rank_ == root ? MPI_IN_PLACE : data, rank_ == root ? data : nullptr, checkedCount(count, what),
                    mpiType(dtype), mpiOp(dtype, op, what), root, asComm(comm_), &request),
        "MPI_Ireduce: " + what);
  wait(&request, 1, "reduce");
}

void MpiCommunicator::doSendRecv(const std::vector<PeerTransfer> &transfers) {
  std::string what = describe("send_recv");
  std::vector<MPI_Request> requests(transfers.size());
  // Tag by direction-free position so repeated transfers to one peer keep order.
  for (size_t i = 0; i < transfers.size(); ++i) {
    const PeerTransfer &t = transfers[i];
    int count = checkedCount(t.buffer.count, what);
    if (t.kind == PeerTransfer::Send)
      check(MPI_Isend(t.buffer.data, count, mpiType(t.buffer.dtype), t.peer, 7, asComm(comm_),
                      &requests[i]),
            "MPI_Isend to " + std::to_string(t.peer) + ": " + what);
    else
      check(MPI_Irecv(t.buffer.data, count, mpiType(t.buffer.dtype), t.peer, 7, asComm(comm_),
                      &requests[i]),
            "MPI_Irecv from " + std::to_string(t.peer) + ": " + what);
  }
  wait(requests.data(), int(requests.size()), "send_recv");
}

class MpiCommunicator::MpiPendingSend : public PendingSend {
public:
  MpiPendingSend(MpiCommunicator &comm, MPI_Request request) : comm_(comm), request_(request) {}
  ~MpiPendingSend() override {
    if (request_ != MPI_REQUEST_NULL) {
      // Not waited for: an error already unwinds; give the request up.
      MPI_Request_free(&request_);
    }
  }
  void wait() override {
    comm_.wait(&request_, 1, "send");
    request_ = MPI_REQUEST_NULL;
  }
  bool done() override {
    if (request_ == MPI_REQUEST_NULL)
      return true;
    int completed = 0;
    check(MPI_Test(&request_, &completed, MPI_STATUS_IGNORE), "MPI_Test: " + comm_.describe("send"));
    return completed != 0;
  }

private:
  MpiCommunicator &comm_;
  MPI_Request request_;
};

std::unique_ptr<PendingSend> MpiCommunicator::doPostSend(const void *data, DType dtype, int64_t count, int peer,
                                                         int tag) {
  std::string what = describe("send");
  MPI_Request request;
  check(MPI_Isend(data, checkedCount(count, what), mpiType(dtype), peer, tag, asComm(comm_), &request),
        "MPI_Isend to " + std::to_string(peer) + ": " + what);
  return std::make_unique<MpiPendingSend>(*this, request);
}

void MpiCommunicator::doReceive(void *data, DType dtype, int64_t count, int peer, int tag) {
  std::string what = describe("receive");
  MPI_Request request;
  check(MPI_Irecv(data, checkedCount(count, what), mpiType(dtype), peer, tag, asComm(comm_), &request),
        "MPI_Irecv from " + std::to_string(peer) + ": " + what);
  wait(&request, 1, "receive");
}

void MpiCommunicator::doBarrier() {
  MPI_Request request;
  check(MPI_Ibarrier(asComm(comm_), &request), "MPI_Ibarrier: " + describe("barrier"));
  wait(&request, 1, "barrier");
}

void MpiCommunicator::doIdleBarrier() {
  MPI_Request request;
  check(MPI_Ibarrier(asComm(comm_), &request), "MPI_Ibarrier: " + describe("barrier"));
  // A millisecond's sleep: short beside what a rank is measured for alone.
  wait(&request, 1, "barrier", 1e-3);
}

} // namespace colossal::rt
