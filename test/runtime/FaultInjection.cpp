//===- FaultInjection.cpp - a job in which one rank fails on purpose ------===//
//
// Each step every rank all-reduces a gradient-sized buffer over the world and
// over its mesh axis. At `--at-step`, rank `--rank` fails in the chosen way:
//
//   --fault die    the process is killed (SIGKILL): no goodbye, no flush
//   --fault hang   the process stays alive but never enters the collective
//   --fault nan    the rank's loss becomes NaN (reported with the step)
//
// The test around it (fault_test.sh) checks that every rank exits non-zero
// in bounded time and that the output names what happened.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/train/Health.h"
#include "colossal/runtime/comm/MpiCommunicator.h"
#include "colossal/runtime/comm/ProcessGroups.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace colossal::rt;

int main(int argc, char **argv) {
  MpiSession mpi(&argc, &argv);
  std::string fault = "die", mesh = "";
  int faultyRank = 1, atStep = 3, steps = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--fault")
      fault = argv[i + 1];
    else if (arg == "--rank")
      faultyRank = std::atoi(argv[i + 1]);
    else if (arg == "--at-step")
      atStep = std::atoi(argv[i + 1]);
    else if (arg == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (arg == "--mesh")
      mesh = argv[i + 1];
  }
  return runOrAbort(
      [&]() -> int {
        auto world = MpiCommunicator::world(nullptr);
        MeshShape shape = mesh.empty() ? MeshShape({{"dp", world->size()}}) : MeshShape::parse(mesh);
        ProcessGroups groups = ProcessGroups::overMpi(shape, *world);
        std::vector<float> gradient(4096, 1.0f);
        for (int step = 1; step <= steps; ++step) {
          double loss = 1.0 / step;
          if (world->rank() == faultyRank && step == atStep) {
            if (fault == "die") {
              std::fprintf(stderr, "fault-injection: rank %d kills itself at step %d\n", faultyRank, step);
              std::raise(SIGKILL);
            } else if (fault == "hang") {
              std::fprintf(stderr, "fault-injection: rank %d stops at step %d\n", faultyRank, step);
              std::this_thread::sleep_for(std::chrono::hours(1));
            } else if (fault == "nan") {
              loss = std::nan("");
            }
          }
          world->allReduce(Buffer::of(gradient.data(), DType::F32, int64_t(gradient.size())));
          groups.axis(int(shape.axes().size()) - 1)
              .allReduce(Buffer::of(gradient.data(), DType::F32, int64_t(gradient.size())), ReduceOp::Max);
          double losses = loss;
          world->allReduce(Buffer::of(&losses, DType::F64, 1));
          requireFiniteStep(step, losses / world->size(), 1.0);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return 0;
      },
      [] { MpiSession::abort(1); });
}
