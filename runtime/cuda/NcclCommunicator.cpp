//===- NcclCommunicator.cpp -----------------------------------------------===//

#include "colossal/runtime/comm/NcclCommunicator.h"

#include "CudaCheck.h"
#include "colossal/runtime/kernels/CudaDevice.h"
#include "colossal/runtime/Memory.h"

#include <nccl.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace colossal::rt {

namespace {

ncclComm_t asComm(void *comm) { return static_cast<ncclComm_t>(comm); }

ncclDataType_t ncclType(DType dtype, bool reducing, const std::string &what) {
  switch (dtype) {
  case DType::F32: return ncclFloat32;
  case DType::F64: return ncclFloat64;
  case DType::BF16: return ncclBfloat16;
  case DType::F16: return ncclFloat16;
  case DType::I64: return ncclInt64;
  case DType::I32: return ncclInt32;
  case DType::U8: return ncclUint8;
  case DType::U16:
    if (reducing)
      fail(what, "NCCL cannot reduce u16");
    return ncclUint8; // moved as bytes (counts doubled by the caller)
  }
  return ncclUint8;
}

/// Element count for NCCL: u16 travels as twice as many bytes.
size_t ncclCount(DType dtype, int64_t count) { return size_t(dtype == DType::U16 ? 2 * count : count); }

ncclRedOp_t ncclOp(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

/// Polls until NCCL leaves the in-progress state, with a deadline.
void settleComm(ncclComm_t comm, ncclResult_t status, const std::string &call, double timeout) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (status == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm);
      fail(call, "still in progress after " + std::to_string(int(timeout)) +
                     " s: a peer stopped or died (communicator aborted)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (ncclCommGetAsyncError(comm, &status) != ncclSuccess)
      break;
  }
  if (status != ncclSuccess)
    fail(call, std::string(ncclGetErrorString(status)) + (ncclGetLastError(comm) ? std::string(": ") + ncclGetLastError(comm) : ""));
}

ncclConfig_t nonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

} // namespace

NcclCommunicator::NcclCommunicator(void *comm, std::string axis, std::vector<int> worldRanks, CommCounters *counters)
    : Communicator(std::move(axis), std::move(worldRanks), counters), comm_(comm) {
  settleComm(asComm(comm_), ncclCommUserRank(asComm(comm_), &rank_), "ncclCommUserRank", timeout());
  settleComm(asComm(comm_), ncclCommCount(asComm(comm_), &size_), "ncclCommCount", timeout());
  cudaStream_t stream;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate (NCCL)");
  stream_ = stream;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ && !aborted_)
    ncclCommDestroy(asComm(comm_));
  if (stream_)
    cudaStreamDestroy(cuda::asStream(stream_));
}

void NcclCommunicator::abort() {
  if (comm_ && !aborted_)
    ncclCommAbort(asComm(comm_));
  aborted_ = true;
}

void NcclCommunicator::settle(int status, const char *call) {
  if (aborted_)
    fail(call, "the communicator was aborted after an earlier failure");
  try {
    settleComm(asComm(comm_), ncclResult_t(status), std::string(call) + ": " + describe(call), timeout());
  } catch (...) {
    aborted_ = true;
    throw;
  }
}

void NcclCommunicator::complete(const char *collective) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout());
  for (;;) {
    cudaError_t state = cudaStreamQuery(cuda::asStream(stream_));
    if (state == cudaSuccess)
      return;
    if (state != cudaErrorNotReady)
      cuda::check(state, collective);
    ncclResult_t asyncError = ncclSuccess;
    ncclCommGetAsyncError(asComm(comm_), &asyncError);
    if (asyncError != ncclSuccess && asyncError != ncclInProgress) {
      abort();
      fail(describe(collective), std::string("NCCL reported ") + ncclGetErrorString(asyncError));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      fail(describe(collective), "did not complete within " + std::to_string(int(timeout())) +
                                     " s: a rank of the group stopped, died or took a different path "
                                     "(communicator aborted; COLOSSAL_COLLECTIVE_TIMEOUT sets the limit)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::split(int color, int key, const std::string &axis,
                                                          std::vector<int> worldRanks) {
  ncclComm_t child = nullptr;
  ncclConfig_t config = nonBlockingConfig();
  const std::string call = "ncclCommSplit for axis " + axis;
  // A non-blocking split fills in the child's handle only once the parent
  // leaves the in-progress state (NVIDIA/nccl#1472), so wait on the parent
  // first, then on the child's own initialisation.
  settleComm(asComm(comm_), ncclCommSplit(asComm(comm_), color, key, &child, &config), call, timeout());
  // The query of the parent completes the split's group job, which is what
  // writes the child's handle; poll until it appears.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout());
  while (!child) {
    ncclResult_t parentStatus = ncclSuccess;
    ncclCommGetAsyncError(asComm(comm_), &parentStatus);
    if (parentStatus != ncclSuccess && parentStatus != ncclInProgress)
      fail(call, ncclGetErrorString(parentStatus));
    if (child)
      break;
    if (std::chrono::steady_clock::now() > deadline) {
      int version = 0;
      ncclGetVersion(&version);
      fail(call, "NCCL " + std::to_string(version) + " returned no communicator for color " + std::to_string(color) +
                     " within " + std::to_string(int(timeout())) + " s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ncclResult_t childStatus = ncclSuccess;
  ncclCommGetAsyncError(child, &childStatus);
  settleComm(child, childStatus, call, timeout());
  auto result = std::unique_ptr<NcclCommunicator>(new NcclCommunicator(child, axis, std::move(worldRanks), counters()));
  result->setTimeout(timeout());
  return result;
}

void NcclCommunicator::doAllReduce(void *data, DType dtype, int64_t count, ReduceOp op) {
  std::string what = describe("all_reduce");
  settle(ncclAllReduce(data, data, ncclCount(dtype, count), ncclType(dtype, true, what), ncclOp(op), asComm(comm_),
                       cuda::asStream(stream_)),
         "ncclAllReduce");
  complete("all_reduce");
}

void NcclCommunicator::doAllGather(const void *send, void *recv, DType dtype, int64_t count) {
  std::string what = describe("all_gather");
  settle(ncclAllGather(send, recv, ncclCount(dtype, count), ncclType(dtype, false, what), asComm(comm_),
                       cuda::asStream(stream_)),
         "ncclAllGather");
  complete("all_gather");
}

void NcclCommunicator::doReduceScatter(const void *send, void *recv, DType dtype, int64_t count, ReduceOp op) {
  std::string what = describe("reduce_scatter");
  settle(ncclReduceScatter(send, recv, ncclCount(dtype, count), ncclType(dtype, true, what), ncclOp(op),
                           asComm(comm_), cuda::asStream(stream_)),
         "ncclReduceScatter");
  complete("reduce_scatter");
}

void NcclCommunicator::doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) {
  std::string what = describe("all_to_all");
  ncclDataType_t type = ncclType(dtype, false, what);
  size_t count = ncclCount(dtype, countPerRank);
  size_t bytes = size_t(countPerRank * bytesOf(dtype));
  settle(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    settle(ncclSend(static_cast<const char *>(send) + peer * bytes, count, type, peer, asComm(comm_),
                    cuda::asStream(stream_)),
           "ncclSend");
    settle(ncclRecv(static_cast<char *>(recv) + peer * bytes, count, type, peer, asComm(comm_),
                    cuda::asStream(stream_)),
           "ncclRecv");
  }
  settle(ncclGroupEnd(), "ncclGroupEnd");
  complete("all_to_all");
}

void NcclCommunicator::doReduce(void *data, DType dtype, int64_t count, int root, ReduceOp op) {
  std::string what = describe("reduce");
  settle(ncclReduce(data, data, ncclCount(dtype, count), ncclType(dtype, true, what), ncclOp(op), root, asComm(comm_),
                    cuda::asStream(stream_)),
         "ncclReduce");
  complete("reduce");
}

void NcclCommunicator::doBroadcast(void *data, DType dtype, int64_t count, int root) {
  std::string what = describe("broadcast");
  settle(ncclBroadcast(data, data, ncclCount(dtype, count), ncclType(dtype, false, what), root, asComm(comm_),
                       cuda::asStream(stream_)),
         "ncclBroadcast");
  complete("broadcast");
}

void NcclCommunicator::doSendRecv(const std::vector<PeerTransfer> &transfers) {
  std::string what = describe("send_recv");
  settle(ncclGroupStart(), "ncclGroupStart");
  for (const PeerTransfer &t : transfers) {
    size_t count = ncclCount(t.buffer.dtype, t.buffer.count);
    ncclDataType_t type = ncclType(t.buffer.dtype, false, what);
    if (t.kind == PeerTransfer::Send)
      settle(ncclSend(t.buffer.data, count, type, t.peer, asComm(comm_), cuda::asStream(stream_)), "ncclSend");
    else
      settle(ncclRecv(t.buffer.data, count, type, t.peer, asComm(comm_), cuda::asStream(stream_)), "ncclRecv");
  }
  settle(ncclGroupEnd(), "ncclGroupEnd");
  complete("send_recv");
}

void NcclCommunicator::doBarrier() {
  void *flag = allocateStaging(4);
  cuda::check(cudaMemsetAsync(flag, 0, 4, cuda::asStream(stream_)), "cudaMemsetAsync (barrier)");
  try {
    settle(ncclAllReduce(flag, flag, 1, ncclInt32, ncclSum, asComm(comm_), cuda::asStream(stream_)),
           "ncclAllReduce (barrier)");
    complete("barrier");
  } catch (...) {
    freeStaging(flag);
    throw;
  }
  freeStaging(flag);
}

namespace {
/// The staging buffers' sizes, to uncharge them when freed.
std::mutex stagingMutex;
std::map<void *, int64_t> stagingBytes;
} // namespace

void *NcclCommunicator::allocateStaging(int64_t bytes) {
  int64_t size = bytes > 0 ? bytes : 1;
  void *data = allocateDeviceTracked(size, MemoryCategory::Communication);
  std::lock_guard<std::mutex> lock(stagingMutex);
  stagingBytes[data] = size;
  return data;
}

void NcclCommunicator::freeStaging(void *data) {
  int64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(stagingMutex);
    auto found = stagingBytes.find(data);
    if (found == stagingBytes.end())
      return;
    size = found->second;
    stagingBytes.erase(found);
  }
  freeDeviceTracked(data, size, MemoryCategory::Communication);
}

void NcclCommunicator::pack(const Buffer &from, void *to) {
  size_t element = size_t(bytesOf(from.dtype));
  cuda::check(cudaMemcpy2DAsync(to, size_t(from.blockLength) * element, from.data, size_t(from.stride) * element,
                                size_t(from.blockLength) * element, size_t(from.count / from.blockLength),
                                cudaMemcpyDeviceToDevice, cuda::asStream(stream_)),
              "cudaMemcpy2DAsync (pack)");
}

void NcclCommunicator::unpack(const void *from, const Buffer &to) {
  size_t element = size_t(bytesOf(to.dtype));
  cuda::check(cudaMemcpy2DAsync(to.data, size_t(to.stride) * element, from, size_t(to.blockLength) * element,
                                size_t(to.blockLength) * element, size_t(to.count / to.blockLength),
                                cudaMemcpyDeviceToDevice, cuda::asStream(stream_)),
              "cudaMemcpy2DAsync (unpack)");
  cuda::check(cudaStreamSynchronize(cuda::asStream(stream_)), "cudaStreamSynchronize (unpack)");
}

NcclSetup NcclSetup::create(MpiCommunicator &mpiWorld, int localRank, CommCounters *counters) {
  cuda::initializeCudaDevice(localRank);
  ncclUniqueId id;
  if (mpiWorld.rank() == 0) {
    ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess)
      fail("ncclGetUniqueId", ncclGetErrorString(status));
  }
  mpiWorld.broadcast(Buffer::of(&id, DType::U8, int64_t(sizeof id)), 0);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t status = ncclCommInitRankConfig(&comm, mpiWorld.size(), id, mpiWorld.rank(), &config);
  settleComm(comm, status, "ncclCommInitRankConfig", mpiWorld.timeout());
  NcclSetup setup;
  setup.world = std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, "world", mpiWorld.worldRanks(), counters));
  return setup;
}

ProcessGroups NcclSetup::groups(const MeshShape &mesh, NcclCommunicator &world, CommCounters *) {
  return ProcessGroups::bySplitting(mesh, world.rank(), world.size(),
                                    [&](int color, int key, const std::string &axis, std::vector<int> ranks) {
                                      return std::unique_ptr<Communicator>(world.split(color, key, axis, std::move(ranks)));
                                    });
}

void *ncclTestAllocate(int64_t bytes) {
  void *data = nullptr;
  cuda::check(cudaMalloc(&data, size_t(bytes > 0 ? bytes : 1)), "cudaMalloc");
  return data;
}
void ncclTestFree(void *data) { cudaFree(data); }
void ncclTestToDevice(void *device, const void *host, int64_t bytes) { cuda::copyToDevice(device, host, bytes); }
void ncclTestToHost(void *host, const void *device, int64_t bytes) { cuda::copyToHost(host, device, bytes); }

} // namespace colossal::rt
