//===- StorageTest.cpp - checkpoints, safetensors, .npy, token files, logs and offload -===//

#include "Reference.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/comm/SingleRankCommunicator.h"
#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/io/Checkpoint.h"
#include "colossal/runtime/io/Crc32.h"
#include "colossal/runtime/io/Npy.h"
#include "colossal/runtime/io/OnnxWeights.h"
#include "colossal/runtime/io/StepLog.h"
#include "colossal/runtime/io/TokenData.h"
#include "colossal/runtime/train/Offload.h"
#include "colossal/runtime/train/ShardedOptimizer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <unistd.h>

using namespace colossal::rt;
using namespace colossal::rt::test;

namespace {

/// A fresh directory under the test's temporary area, removed afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/colossal-rt-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void expectErrorContains(const std::function<void()> &body, const std::string &text) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one mentioning \"" << text << "\"";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

void flipByte(const std::string &path, long offsetFromEnd) {
  std::vector<unsigned char> bytes = readWholeFile(path);
  bytes[bytes.size() - size_t(offsetFromEnd)] ^= 0x40;
  writeFileAtomically(path, {{bytes.data(), int64_t(bytes.size())}});
}

void truncateFile(const std::string &path, size_t keep) {
  std::vector<unsigned char> bytes = readWholeFile(path);
  bytes.resize(keep);
  writeFileAtomically(path, {{bytes.data(), int64_t(bytes.size())}});
}

TEST(Crc32Test, StandardCheckValue) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("56789", 5, crc32("1234", 4)), 0xCBF43926u);
  // Eight bytes a step and the tail: every length and split agrees with the
  // bitwise definition.
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += char(i * 37 + 11);
  auto bitwise = [](const std::string &s) {
    uint32_t c = ~0u;
    for (unsigned char b : s) {
      c ^= b;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
  };
  for (size_t n = 0; n <= text.size(); ++n) {
    EXPECT_EQ(crc32(text.data(), int64_t(n)), bitwise(text.substr(0, n))) << n;
    EXPECT_EQ(crc32(text.data() + n / 3, int64_t(n - n / 3), crc32(text.data(), int64_t(n / 3))),
              bitwise(text.substr(0, n)))
        << n;
  }
}

TEST(SafetensorsTest, RoundTripAndEveryCorruptionIsRefused) {
  TempDir dir;
  std::string path = dir.path + "/t.safetensors";
  auto w = randomVector(12, 1);
  std::vector<int64_t> ids = {1, 2, 3};
  writeSafetensors(path, {{"w", DType::F32, {3, 4}, w.data(), 48}, {"ids", DType::I64, {3}, ids.data(), 24}},
                   {{"note", "hello"}});
  SafetensorsFile file = SafetensorsFile::read(path);
  const TensorView &tw = file.require("w", DType::F32, {3, 4});
  EXPECT_EQ(std::memcmp(tw.data, w.data(), 48), 0);
  EXPECT_EQ(file.metadata().at("note"), "hello");
  expectErrorContains([&] { file.require("w", DType::F32, {4, 3}); }, "tensor w is f32 [3, 4], expected f32 [4, 3]");
  expectErrorContains([&] { file.require("b", DType::F32, {4}); }, "no tensor b");

  flipByte(path, 3); // inside the last tensor
  expectErrorContains([&] { SafetensorsFile::read(path); }, "tensor ids: checksum mismatch");
  truncateFile(path, 40);
  expectErrorContains([&] { SafetensorsFile::read(path); }, "does not fit the file");
  truncateFile(path, 3);
  expectErrorContains([&] { SafetensorsFile::read(path); }, "not a safetensors file");
  expectErrorContains([&] { SafetensorsFile::read(dir.path + "/missing"); }, "No such file");
  std::string junk = std::string("\x08\0\0\0\0\0\0\0", 8) + "{nojson}";
  writeFileAtomically(path, {{junk.data(), int64_t(junk.size())}});
  expectErrorContains([&] { SafetensorsFile::read(path); }, "header is not a JSON object");
}

TEST(CheckpointTest, SaveLoadAndRefuseCorruptOrMismatched) {
  TempDir dir;
  SingleRankCommunicator world;
  auto w = randomVector(6, 2);
  saveCheckpoint(dir.path + "/ckpt", world, 42,
                 {{{"layer.w", DType::F32, {2, 3}, w.data(), 24}, {2, 3}, {0, 0}}}, {{"optimizer", "lamb"}});
  LoadedCheckpoint loaded = LoadedCheckpoint::load(dir.path + "/ckpt", world);
  EXPECT_EQ(loaded.step(), 42);
  EXPECT_EQ(loaded.info().at("optimizer"), "lamb");
  std::vector<unsigned char> read;
  loaded.readWhole(world, {{"layer.w", DType::F32, {2, 3}}},
                   [&](size_t, const std::vector<unsigned char> &b) { read = b; });
  ASSERT_EQ(read.size(), 24u);
  EXPECT_EQ(std::memcmp(read.data(), w.data(), 24), 0);
  expectErrorContains(
      [&] {
        loaded.readWhole(world, {{"layer.b", DType::F32, {3}}}, [](size_t, const std::vector<unsigned char> &) {});
      },
      "holds no tensor 'layer.b'");
  expectErrorContains(
      [&] {
        loaded.readWhole(world, {{"layer.w", DType::F32, {3, 3}}}, [](size_t, const std::vector<unsigned char> &) {});
      },
      "tensor 'layer.w' is [2, 3] in the checkpoint, [3, 3] in this program");
  expectErrorContains(
      [&] {
        loaded.readWhole(world, {{"layer.w", DType::I64, {2, 3}}}, [](size_t, const std::vector<unsigned char> &) {});
      },
      "tensor 'layer.w' is f32, this program's is i64");

  // The index records global shapes and shard offsets for resharding.
  std::vector<unsigned char> index = readWholeFile(dir.path + "/ckpt/index.json");
  std::string text(index.begin(), index.end());
  EXPECT_NE(text.find("\"global_shape\""), std::string::npos);
  EXPECT_NE(text.find("\"offsets\""), std::string::npos);

  std::string shard = dir.path + "/ckpt/" + checkpointFileName(0, 1);
  flipByte(shard, 1);
  expectErrorContains([&] { LoadedCheckpoint::load(dir.path + "/ckpt", world); }, "checksum mismatch");
  expectErrorContains([&] { LoadedCheckpoint::load(dir.path + "/none", world); }, "index.json");
  expectErrorContains(
      [&] {
        saveCheckpoint(dir.path + "/bad", world, 1, {{{"x", DType::F32, {2, 3}, w.data(), 24}, {2, 2}, {0, 0}}});
      },
      "exceeds the global shape");
}

TEST(CheckpointTest, ReplacesOnlyACheckpointAndKeepsAFolderOfThem) {
  TempDir dir;
  SingleRankCommunicator world;
  std::vector<float> w{1, 2, 3};
  std::vector<Shard> shards{{{"w", DType::F32, {3}, w.data(), 12}, {3}, {0}}};
  for (int64_t step : {1, 2, 3})
    saveCheckpointInFolder(dir.path + "/series", world, step, shards, {}, /*keep=*/2);
  EXPECT_TRUE(canHoldCheckpoint(dir.path + "/series", true));
  EXPECT_NE(::access((dir.path + "/series/step-00000002/index.json").c_str(), F_OK), -1);
  EXPECT_EQ(::access((dir.path + "/series/step-00000001").c_str(), F_OK), -1); // only the newest 2 kept
  EXPECT_EQ(LoadedCheckpoint::load(dir.path + "/series", world).step(), 3);    // latest
  // A save over an earlier checkpoint replaces it whole; over other files, never.
  saveCheckpoint(dir.path + "/one", world, 5, shards);
  saveCheckpoint(dir.path + "/one", world, 6, shards);
  EXPECT_EQ(LoadedCheckpoint::load(dir.path + "/one", world).step(), 6);
  makeDirectories(dir.path + "/mine");
  writeFileAtomically(dir.path + "/mine/notes.txt.x", {{"x", 1}});
  EXPECT_FALSE(canHoldCheckpoint(dir.path + "/mine", false));
  expectErrorContains([&] { saveCheckpoint(dir.path + "/mine", world, 1, shards); }, "holds other files");
  EXPECT_EQ(readWholeFile(dir.path + "/mine/notes.txt.x").size(), 1u);
}

TEST(OnnxWeightsTest, AppendsTensorProtosToTheGraphField) {
  TempDir dir;
  // ModelProto{ir_version: 8, graph: GraphProto{name: "g"}}, by hand.
  const unsigned char model[] = {0x08, 0x08, 0x3A, 0x03, 0x12, 0x01, 'g'};
  writeFileAtomically(dir.path + "/graph.onnx", {{model, int64_t(sizeof model)}});
  float w[2] = {1.0f, 2.0f};
  writeOnnxWithWeights(dir.path + "/graph.onnx", {{"w", DType::F32, {2}, w, 8}}, dir.path + "/model.onnx");
  // The graph (field 7) grows by one initializer (field 5): a TensorProto of
  // dims (1) = 2, data_type (2) = FLOAT, name (8) = "w", raw_data (9).
  const std::vector<unsigned char> want = {0x08, 0x08, 0x3A, 0x16, 0x12, 0x01, 'g',  0x2A, 0x11,
                                           0x08, 0x02, 0x10, 0x01, 0x42, 0x01, 'w',  0x4A, 0x08,
                                           0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40};
  EXPECT_EQ(readWholeFile(dir.path + "/model.onnx"), want);

  const unsigned char truncated[] = {0x08, 0x08, 0x3A, 0x10, 0x12};
  writeFileAtomically(dir.path + "/bad.onnx", {{truncated, int64_t(sizeof truncated)}});
  expectErrorContains([&] { writeOnnxWithWeights(dir.path + "/bad.onnx", {}, dir.path + "/out.onnx"); },
                      "a field runs past the end");
  const unsigned char graphless[] = {0x08, 0x08};
  writeFileAtomically(dir.path + "/none.onnx", {{graphless, int64_t(sizeof graphless)}});
  expectErrorContains([&] { writeOnnxWithWeights(dir.path + "/none.onnx", {}, dir.path + "/out.onnx"); },
                      "holds 0 graphs");
}

TEST(NpyTest, ReadsNumpyWrittenFilesAndRoundTrips) {
  // A feed written by NumPy itself (the fixture generator).
  NpyArray ids = readNpy(std::string(COLOSSAL_FIXTURES_DIR) + "/gpt2/feed/input_ids.npy");
  EXPECT_EQ(ids.dtype, DType::I64);
  ASSERT_EQ(ids.shape.size(), 2u);
  EXPECT_EQ(int64_t(ids.data.size()), ids.elements() * 8);

  TempDir dir;
  auto x = randomVector(15, 3);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 5}, std::vector<int64_t>{15}}) {
    writeNpy(dir.path + "/x.npy", DType::F32, shape, x.data());
    NpyArray back = readNpy(dir.path + "/x.npy");
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(std::memcmp(back.data.data(), x.data(), 60), 0);
  }
  truncateFile(dir.path + "/x.npy", readWholeFile(dir.path + "/x.npy").size() - 4);
  expectErrorContains([&] { readNpy(dir.path + "/x.npy"); }, "needs 60 data bytes but the file has 56");
  std::string fortran = std::string("\x93NUMPY\x01\x00\x46\x00", 10) +
                        "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }" + std::string(14, ' ') + "\n";
  writeFileAtomically(dir.path + "/f.npy", {{fortran.data(), int64_t(fortran.size())}});
  expectErrorContains([&] { readNpy(dir.path + "/f.npy"); }, "Fortran");
}

TEST(TokenDataTest, DeterministicShuffledOrderAndRankSlices) {
  TempDir dir;
  std::vector<uint16_t> tokens(1001);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = uint16_t(i % 500);
  writeFileAtomically(dir.path + "/t.u16", {{tokens.data(), int64_t(tokens.size() * 2)}});
  TokenDataset data = TokenDataset::open(dir.path + "/t.u16", TokenFormat::Auto, 500);
  const int64_t seq = 10, batch = 4;
  EXPECT_EQ(data.samples(seq), 100);
  // One epoch visits every sample once; the next epoch uses another order.
  std::set<int64_t> seen;
  std::vector<int64_t> first, second;
  for (int64_t p = 0; p < 100; ++p) {
    seen.insert(data.sampleAt(p, seq, 7));
    first.push_back(data.sampleAt(p, seq, 7));
  }
  for (int64_t p = 100; p < 200; ++p)
    second.push_back(data.sampleAt(p, seq, 7));
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(first, second);
  // Two data-parallel ranks reading halves see the same rows as one reader.
  std::vector<int64_t> in(batch * seq), lab(batch * seq), inLo(2 * seq), labLo(2 * seq), inHi(2 * seq), labHi(2 * seq);
  TokenDataset other = TokenDataset::open(dir.path + "/t.u16", TokenFormat::U16, 500);
  data.batch(3, batch, seq, 0, batch, 7, in.data(), lab.data());
  other.batch(3, batch, seq, 0, 2, 7, inLo.data(), labLo.data());
  other.batch(3, batch, seq, 2, 4, 7, inHi.data(), labHi.data());
  inLo.insert(inLo.end(), inHi.begin(), inHi.end());
  EXPECT_EQ(in, inLo);
  // Labels are the inputs shifted by one token.
  int64_t sample = data.sampleAt(3 * batch, seq, 7);
  EXPECT_EQ(in[0], int64_t(tokens[size_t(sample * seq)]));
  EXPECT_EQ(lab[0], int64_t(tokens[size_t(sample * seq + 1)]));
  expectErrorContains([&] { TokenDataset::open(dir.path + "/t.u16", TokenFormat::U16, 100); },
                      "outside the vocabulary of 100");
  expectErrorContains([&] { TokenDataset::open(dir.path + "/t.txt"); }, "cannot tell the format");
}

TEST(TokenDataTest, EveryStoredWidthReadsTheSameTokens) {
  // The same 301 ids stored as uint16, uint32 and as .npy of every integer
  // type give the same batches; the file is mapped, and a dataset outlives
  // the copies it was made from.
  TempDir dir;
  std::vector<int64_t> ids(301);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int64_t((i * 37) % 250);
  std::vector<uint16_t> u16(ids.begin(), ids.end());
  std::vector<uint32_t> u32(ids.begin(), ids.end());
  std::vector<int32_t> i32(ids.begin(), ids.end());
  std::vector<uint8_t> u8(ids.begin(), ids.end());
  writeFileAtomically(dir.path + "/t.u16", {{u16.data(), int64_t(u16.size() * 2)}});
  writeFileAtomically(dir.path + "/t.u32", {{u32.data(), int64_t(u32.size() * 4)}});
  std::vector<int64_t> shape{int64_t(ids.size())};
  writeNpy(dir.path + "/i64.npy", DType::I64, shape, ids.data());
  writeNpy(dir.path + "/i32.npy", DType::I32, shape, i32.data());
  writeNpy(dir.path + "/u16.npy", DType::U16, shape, u16.data());
  writeNpy(dir.path + "/u8.npy", DType::U8, shape, u8.data());
  const int64_t seq = 6, batch = 3;
  std::vector<int64_t> want(batch * seq), wantLabels(batch * seq);
  TokenDataset::open(dir.path + "/t.u16", TokenFormat::Auto, 250).batch(5, batch, seq, 0, batch, 1, want.data(),
                                                                         wantLabels.data());
  for (const char *name : {"t.u32", "i64.npy", "i32.npy", "u16.npy", "u8.npy"}) {
    std::optional<TokenDataset> kept;
    {
      TokenDataset data = TokenDataset::open(dir.path + "/" + name, TokenFormat::Auto, 250);
      EXPECT_EQ(data.tokens(), 301) << name;
      for (int64_t i : {0, 1, 150, 300})
        EXPECT_EQ(data.tokenAt(i), ids[size_t(i)]) << name << " token " << i;
      kept = data;
    }
    std::vector<int64_t> in(batch * seq), labels(batch * seq);
    kept->batch(5, batch, seq, 0, batch, 1, in.data(), labels.data());
    EXPECT_EQ(in, want) << name;
    EXPECT_EQ(labels, wantLabels) << name;
  }
  // Negative ids in a signed file, an empty file, a directory: clear errors.
  std::vector<int32_t> negative{3, -1, 4};
  writeNpy(dir.path + "/neg.npy", DType::I32, {3}, negative.data());
  expectErrorContains([&] { TokenDataset::open(dir.path + "/neg.npy"); }, "token 1 is -1");
  writeFileAtomically(dir.path + "/empty.u16", {});
  TokenDataset empty = TokenDataset::open(dir.path + "/empty.u16");
  EXPECT_EQ(empty.tokens(), 0);
  expectErrorContains([&] { empty.batch(0, 1, 4, 0, 1, 0, want.data(), wantLabels.data()); },
                      "fewer than one sample");
  expectErrorContains([&] { TokenDataset::open(dir.path + "/missing.u16"); }, "No such file");
}

TEST(StepLogTest, OneJsonObjectPerLineWithNullForNonFinite) {
  StepRecord r;
  r.step = 3, r.loss = 2.5, r.lr = 1e-3, r.gradNorm = std::nan(""), r.extra = {{"comm", "{}"}};
  EXPECT_EQ(formatStepRecord(r), "{\"step\": 3, \"loss\": 2.5, \"lr\": 0.001, \"grad_norm\": null, \"loss_scale\": 1, "
                                 "\"tokens_per_s\": 0, \"time\": 0, \"comm\": {}}");
  TempDir dir;
  {
    StepLog log(dir.path + "/log.jsonl");
    log.write(r);
    log.write(r);
  }
  std::ifstream in(dir.path + "/log.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line))
    ++lines;
  EXPECT_EQ(lines, 2);
  expectErrorContains([&] { StepLog bad(dir.path + "/no/such/dir/log"); }, "open log");
}

TEST(OffloadTest, OffloadedShardUpdatesBitForBitLikeTheDeviceShard) {
  // One rank's ZeRO-1 shard is every weight: the offloaded optimizer must
  // move each gradient down and each weight up once per step, keep its state
  // in pinned memory, and update exactly as the device optimizer does.
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Lamb, OptimizerKind::Lars}) {
    SCOPED_TRACE(nameOf(kind));
    OptimizerConfig config;
    config.kind = kind;
    std::vector<TensorConventions> conventions = {conventionsOf(kind, 2), conventionsOf(kind, 1)};
    Floats a0 = tracked(randomVector(30, 1)), b0 = tracked(randomVector(70, 2));
    std::vector<Floats> grads = {tracked(randomVector(30, 3)), tracked(randomVector(70, 4))};
    auto run = [&](CopyEngine *engine, Floats &a, Floats &b, double &norm) {
      SingleRankCommunicator dp("dp");
      int64_t pinnedBefore = MemoryTracker::global().current(MemorySpace::PinnedHost);
      ShardedOptimizer sharded(dp, 1, config, conventions, {&a, &b}, engine);
      int64_t pinned = MemoryTracker::global().current(MemorySpace::PinnedHost) - pinnedBefore;
      // Moments, and the host's fp32 weights and gradients.
      EXPECT_EQ(pinned, engine ? (momentsOf(kind) + 2) * 100 * 4 : 0);
      for (int64_t step = 1; step <= 3; ++step) {
        std::vector<Floats> averaged = grads;
        sharded.useGradients(averaged);
        norm = sharded.gradientNorm();
        sharded.step(0.01, step, 0.5f);
      }
    };
    Floats deviceA = a0, deviceB = b0, hostA = a0, hostB = b0;
    double deviceNorm = 0, hostNorm = 0;
    run(nullptr, deviceA, deviceB, deviceNorm);
    auto engine = makeHostCopyEngine();
    run(engine.get(), hostA, hostB, hostNorm);
    EXPECT_EQ(hostA, deviceA);
    EXPECT_EQ(hostB, deviceB);
    EXPECT_EQ(hostNorm, deviceNorm);
    EXPECT_NE(hostA, a0);
    // The initial weights and three steps' gradients down; three steps' weights up.
    EXPECT_EQ(engine->bytesToHost(), 4 * 100 * 4);
    EXPECT_EQ(engine->bytesToDevice(), 3 * 100 * 4);
  }
}

} // namespace
