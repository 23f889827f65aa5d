//===- CheckpointAcrossRanks.cpp - a sharded checkpoint under mpirun -------===//
//
//   mpirun -np 3 checkpoint-across-ranks DIR
//
// Each rank saves its row block of a 7 x 4 tensor (uneven: 3, 2, 2 rows) and
// a replicated scalar; the job reloads and compares bytes, checks the index
// describes every shard, then rank 0 corrupts rank 1's file and every rank
// must refuse the reload, rank 1 with the checksum and the others naming
// rank 1. Exit 0 only if all of that held on every rank.
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/io/Checkpoint.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/MpiCommunicator.h"

#include <cstdio>
#include <cstring>

using namespace colossal::rt;

int main(int argc, char **argv) {
  MpiSession mpi(&argc, &argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint-across-ranks DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  return runOrAbort(
      [&]() -> int {
        auto world = MpiCommunicator::world(nullptr);
        int r = world->rank();
        int64_t rows = r == 0 ? 3 : 2, start = r == 0 ? 0 : 3 + 2 * (r - 1);
        std::vector<float> block(size_t(rows * 4));
        for (size_t i = 0; i < block.size(); ++i)
          block[i] = float(start * 4 + int64_t(i));
        float scale = 0.5f;
        saveCheckpoint(dir, *world, 9,
                       {{{"w", DType::F32, {rows, 4}, block.data(), rows * 16}, {7, 4}, {start, 0}},
                        {{"scale", DType::F32, {}, &scale, 4}, {}, {}}});
        int failures = 0;
        {
          LoadedCheckpoint loaded = LoadedCheckpoint::load(dir, *world);
          std::vector<unsigned char> w;
          loaded.readWhole(*world, {{"w", DType::F32, {7, 4}}},
                           [&](size_t, const std::vector<unsigned char> &whole) { w = whole; });
          if (loaded.step() != 9 || w.size() != 7 * 16 ||
              std::memcmp(w.data() + start * 16, block.data(), size_t(rows * 16)) != 0) {
            std::fprintf(stderr, "rank %d: reloaded shard differs\n", r);
            ++failures;
          }
        }
        std::vector<unsigned char> index = readWholeFile(dir + "/index.json");
        std::string text(index.begin(), index.end());
        if (text.find("\"world_size\": 3") == std::string::npos || text.find("\"offsets\": [\n") == std::string::npos) {
          std::fprintf(stderr, "rank %d: index lacks world_size or offsets:\n%s\n", r, text.c_str());
          ++failures;
        }
        world->barrier();
        if (r == 0) {
          std::string victim = dir + "/" + checkpointFileName(1, 3);
          std::vector<unsigned char> bytes = readWholeFile(victim);
          bytes[bytes.size() - 6] ^= 1; // inside the data of the last tensor
          writeFileAtomically(victim, {{bytes.data(), int64_t(bytes.size())}});
        }
        world->barrier();
        try {
          LoadedCheckpoint::load(dir, *world);
          std::fprintf(stderr, "rank %d: a corrupt checkpoint was accepted\n", r);
          ++failures;
        } catch (const Error &e) {
          std::string want = r == 1 ? "checksum mismatch" : "rank 1 failed";
          if (std::string(e.what()).find(want) == std::string::npos) {
            std::fprintf(stderr, "rank %d: error does not say \"%s\": %s\n", r, want.c_str(), e.what());
            ++failures;
          } else if (r <= 1) {
            std::printf("rank %d refused: %s\n", r, e.what());
          }
        }
        world->allReduce(Buffer::of(&failures, DType::I32, 1));
        if (r == 0)
          std::printf("checkpoint-across-ranks: %s\n", failures ? "FAILED" : "passed");
        return failures ? 1 : 0;
      },
      [] { MpiSession::abort(1); });
}
