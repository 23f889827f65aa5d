//===- RawDataInPlaceTest.cpp - a graph parsed without its weights' bytes ===//
//
// The framing rewrite is checked against protobuf's own parse of the whole
// file: every large initializer must name exactly the bytes protobuf reads
// as its raw data, everything else must be unchanged, and a model file must
// import to the same module as its bytes parsed whole. Malformed framing is
// left to protobuf, which words the error.
//
//===----------------------------------------------------------------------===//

#include "RawDataInPlace.h"
#include "ImportChecked.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace {

using colossal::import::withRawDataInPlace;
using colossal::test::boundDimensions;
using colossal::test::readFixtureBytes;

const char *const kFixtures[] = {
    "mlp/mlp_opset17.onnx", "cnn/cnn_opset17.onnx",     "gpt2/gpt2_opset17.onnx",       "bert/bert_opset17.onnx",
    "vit/vit_opset17.onnx", "llama/llama_opset17.onnx", "special/large_constants.onnx", "special/external_data.onnx"};

std::map<std::string, std::string> externalEntries(const onnx::TensorProto &tensor) {
  std::map<std::string, std::string> entries;
  for (const auto &entry : tensor.external_data())
    entries[entry.key()] = entry.value();
  return entries;
}

TEST(RawDataInPlace, LargeRawDataNamesTheBytesProtobufReads) {
  int placed = 0, kept = 0;
  for (const char *fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    std::string bytes = readFixtureBytes(fixture);
    ASSERT_FALSE(bytes.empty());
    onnx::ModelProto whole, rewritten;
    ASSERT_TRUE(whole.ParseFromString(bytes));
    std::optional<std::string> graph = withRawDataInPlace(bytes, "model.onnx", 1024);
    ASSERT_TRUE(graph);
    ASSERT_TRUE(rewritten.ParseFromString(*graph));
    int placedBefore = placed;

    // Everything but the initializers is byte for byte the same.
    onnx::ModelProto wholeGraphless = whole, rewrittenGraphless = rewritten;
    wholeGraphless.mutable_graph()->clear_initializer();
    rewrittenGraphless.mutable_graph()->clear_initializer();
    EXPECT_EQ(wholeGraphless.SerializeAsString(), rewrittenGraphless.SerializeAsString());

    ASSERT_EQ(whole.graph().initializer_size(), rewritten.graph().initializer_size());
    for (int i = 0; i < whole.graph().initializer_size(); ++i) {
      const onnx::TensorProto &before = whole.graph().initializer(i), &after = rewritten.graph().initializer(i);
      SCOPED_TRACE(before.name());
      if (before.raw_data().size() < 1024) {
        EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
        ++kept;
        continue;
      }
      ++placed;
      EXPECT_FALSE(after.has_raw_data());
      EXPECT_EQ(after.data_location(), onnx::TensorProto::EXTERNAL);
      std::map<std::string, std::string> entries = externalEntries(after);
      EXPECT_EQ(entries["location"], "model.onnx");
      EXPECT_EQ(entries[colossal::import::kRawDataInModelFileKey.str()], "1");
      size_t offset = std::stoull(entries["offset"]), length = std::stoull(entries["length"]);
      ASSERT_LE(offset + length, bytes.size());
      EXPECT_EQ(bytes.substr(offset, length), before.raw_data());
      onnx::TensorProto afterWithoutPlace = after, beforeWithoutData = before;
      afterWithoutPlace.clear_external_data();
      afterWithoutPlace.clear_data_location();
      beforeWithoutData.clear_raw_data();
      EXPECT_EQ(afterWithoutPlace.SerializeAsString(), beforeWithoutData.SerializeAsString());
    }
    if (placed == placedBefore)
      EXPECT_EQ(*graph, bytes) << "nothing to leave in place: the bytes unchanged";
    else
      EXPECT_LT(graph->size(), bytes.size());
  }
  EXPECT_GT(placed, 10);
  EXPECT_GT(kept, 10);
}

/// A length-delimited field on the wire.
std::string lengthDelimited(uint32_t field, const std::string &payload) {
  std::string out(1, char(field << 3 | 2));
  for (uint64_t n = payload.size();; n >>= 7) {
    out += char((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80)
      break;
  }
  return out + payload;
}

TEST(RawDataInPlace, FramingItDoesNotRewriteIsLeftToProtobuf) {
  std::string bytes = readFixtureBytes("gpt2/gpt2_opset17.onnx");
  ASSERT_FALSE(bytes.empty());
  // A prefix that ends inside a field: refused exactly where protobuf
  // refuses it (a prefix of whole fields is a valid, smaller message).
  for (size_t size = 1; size < bytes.size(); size += 97) {
    onnx::ModelProto prefix;
    EXPECT_EQ(bool(withRawDataInPlace(llvm::StringRef(bytes).take_front(size), "m.onnx", 1024)),
              prefix.ParseFromArray(bytes.data(), int(size)))
        << size;
  }
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(bytes));
  // Two graph fields, which protobuf merges into one message.
  EXPECT_FALSE(withRawDataInPlace(bytes + lengthDelimited(7, model.graph().SerializeAsString()), "m.onnx", 1024));
  // A tensor whose raw data appears twice: protobuf keeps the last.
  std::string tensor = model.graph().initializer(0).SerializeAsString() + lengthDelimited(9, std::string(2048, '\0'));
  onnx::TensorProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(tensor));
  ASSERT_EQ(parsed.raw_data().size(), 2048u);
  EXPECT_FALSE(withRawDataInPlace(lengthDelimited(7, lengthDelimited(5, tensor)), "m.onnx", 1024));
  // A group (wire type 3), which protobuf parses and this does not.
  EXPECT_FALSE(withRawDataInPlace(std::string(1, char(20 << 3 | 3)) + std::string(1, char(20 << 3 | 4)) + bytes,
                                  "m.onnx", 1024));
}

std::string printed(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

void registerDialects(mlir::MLIRContext &context) {
  context.loadDialect<colossal::train::TrainDialect, mlir::func::FuncDialect>();
}

TEST(RawDataInPlace, AFileImportsAsItsBytesParsedWhole) {
  for (const char *fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    std::string path = std::string(COLOSSAL_FIXTURES_DIR) + "/" + fixture;
    std::string bytes = readFixtureBytes(fixture);
    mlir::MLIRContext fromFile, fromBytes;
    registerDialects(fromFile);
    registerDialects(fromBytes);
    std::shared_ptr<const colossal::OnnxFile> file = colossal::OnnxFile::read(fromFile, path);
    ASSERT_TRUE(file);
    colossal::ImportOptions options = boundDimensions();
    if (std::optional<colossal::FixedBatch> fixed = colossal::fixedBatchOfFile(path, options))
      options.batch = fixed->size;
    auto a = colossal::importOnnxFile(fromFile, *file, options);
    auto b = colossal::importOnnxBytes(fromBytes, bytes.data(), bytes.size(), path,
                                       std::filesystem::path(path).parent_path().string(), options);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(printed(*a), printed(*b));
  }
}

/// What importing the file `bytes`, written as NAME in a fresh folder, gives:
/// the module printed, or the first error.
struct FileImport {
  std::string module, error;
};

/// Writes `bytes` as NAME in a fresh folder, removed at the end of the scope.
struct ScratchFile {
  ScratchFile(const std::string &bytes, const std::string &name)
      : folder(std::filesystem::temp_directory_path() / "colossal-raw-data-in-place") {
    std::filesystem::create_directories(folder);
    path = (folder / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~ScratchFile() { std::filesystem::remove_all(folder); }
  std::filesystem::path folder;
  std::string path;
};

FileImport importFile(const std::string &bytes, const std::string &name,
                      const colossal::ImportOptions &options = boundDimensions()) {
  ScratchFile scratch(bytes, name);
  mlir::MLIRContext context;
  registerDialects(context);
  FileImport result;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && result.error.empty())
      result.error = diag.str();
    return mlir::success();
  });
  if (std::shared_ptr<const colossal::OnnxFile> file = colossal::OnnxFile::read(context, scratch.path))
    if (auto module = colossal::importOnnxFile(context, *file, options))
      result.module = printed(*module);
  return result;
}

/// loss = mean(where(keep, x @ w, 0)^2) with x [32, 40]: the 10 KB weight
/// `w` and the 2 KB mask `keep` are large enough to be left in place; `keep`
/// is a constant the importer folds into the IR.
std::string maskedModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto &graph = *model.mutable_graph();
  graph.set_name("masked");
  auto addNode = [&](const char *op, std::vector<std::string> inputs, const char *output) {
    onnx::NodeProto &node = *graph.add_node();
    node.set_op_type(op);
    node.set_name(output);
    for (const std::string &input : inputs)
      node.add_input(input);
    node.add_output(output);
    return &node;
  };
  addNode("MatMul", {"x", "w"}, "h");
  addNode("Where", {"keep", "h", "zero"}, "z");
  addNode("Mul", {"z", "z"}, "square");
  onnx::AttributeProto keepDims;
  keepDims.set_name("keepdims");
  keepDims.set_type(onnx::AttributeProto::INT);
  keepDims.set_i(0);
  *addNode("ReduceMean", {"square"}, "loss")->add_attribute() = keepDims;
  auto addInitializer = [&](const char *name, int32_t type, std::vector<int64_t> dims, std::string raw) {
    onnx::TensorProto &t = *graph.add_initializer();
    t.set_name(name);
    t.set_data_type(type);
    for (int64_t d : dims)
      t.add_dims(d);
    t.set_raw_data(std::move(raw));
  };
  std::string weights(40 * 64 * 4, '\0'), keep(32 * 64, '\0');
  for (size_t i = 0; i < weights.size(); i += 4) {
    weights[i + 2] = char(i * 13);
    weights[i + 3] = 0x3c; // about 0.01, each a little different
  }
  for (size_t i = 0; i < keep.size(); ++i)
    keep[i] = char((i * 7 + i / 64 * 3) % 10 < 7);
  addInitializer("w", onnx::TensorProto::FLOAT, {40, 64}, weights);
  addInitializer("keep", onnx::TensorProto::BOOL, {32, 64}, keep);
  addInitializer("zero", onnx::TensorProto::FLOAT, {}, std::string(4, '\0'));
  auto valueInfo = [](onnx::ValueInfoProto &info, const char *name, std::vector<int64_t> dims) {
    info.set_name(name);
    auto *tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    auto *shape = tensor->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  };
  valueInfo(*graph.add_input(), "x", {32, 40});
  valueInfo(*graph.add_output(), "loss", {});
  return model.SerializeAsString();
}

TEST(RawDataInPlace, AConstantLeftInPlaceIsReadFromItsOffset) {
  std::string bytes = maskedModel();
  FileImport file = importFile(bytes, "masked.onnx", {});
  ASSERT_EQ(file.error, "");
  mlir::MLIRContext context;
  registerDialects(context);
  auto whole = colossal::importOnnxBytes(context, bytes.data(), bytes.size(), "masked.onnx", ".", {});
  ASSERT_TRUE(whole);
  EXPECT_EQ(file.module, printed(*whole));
  EXPECT_NE(file.module.find("tensor<32x64xi1>"), std::string::npos) << "the mask is folded into the IR";
}

TEST(RawDataInPlace, ALargeTensorOfTheWrongSizeIsReportedAsInlineData) {
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(readFixtureBytes("gpt2/gpt2_opset17.onnx")));
  onnx::TensorProto *weight = nullptr;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer())
    if (t.raw_data().size() >= 4096) {
      weight = &t;
      break;
    }
  ASSERT_TRUE(weight);
  size_t needed = weight->raw_data().size();
  weight->mutable_raw_data()->resize(needed - 1024);
  std::string error = importFile(model.SerializeAsString(), "short.onnx").error;
  EXPECT_NE(error.find("initializer '" + weight->name() + "' holds " + std::to_string(needed - 1024) +
                       " bytes of data, but its shape needs " + std::to_string(needed)),
            std::string::npos)
      << error;
  // A file name the external-data rules refuse is parsed whole, and imports.
  EXPECT_EQ(importFile(readFixtureBytes("gpt2/gpt2_opset17.onnx"), "a..b.onnx").error, "");
}

TEST(RawDataInPlace, WeightsAndAWrittenGraphHoldTheFilesBytes) {
  std::string bytes = maskedModel();
  onnx::ModelProto whole;
  ASSERT_TRUE(whole.ParseFromString(bytes));
  ScratchFile scratch(bytes, "masked.onnx");
  ASSERT_EQ(whole.graph().initializer(0).name(), "w");
  // The weight's values, read from its place in the file.
  std::string error;
  auto values = colossal::readInitialValues(scratch.path, {"w"}, error);
  ASSERT_TRUE(values) << error;
  const std::string &raw = whole.graph().initializer(0).raw_data();
  ASSERT_EQ(values->at("w").floats.size() * 4, raw.size());
  EXPECT_EQ(std::memcmp(values->at("w").floats.data(), raw.data(), raw.size()), 0);
  // The graph written without its weights holds the constant inline again.
  std::string written = (scratch.folder / "graph.onnx").string();
  ASSERT_TRUE(colossal::writeGraphWithoutWeights(scratch.path, {"w"}, written, error)) << error;
  onnx::ModelProto graph;
  std::ifstream in(written, std::ios::binary);
  ASSERT_TRUE(graph.ParseFromIstream(&in));
  ASSERT_EQ(graph.graph().initializer_size(), 2);
  const onnx::TensorProto &keep = graph.graph().initializer(0);
  EXPECT_EQ(keep.name(), "keep");
  EXPECT_EQ(keep.SerializeAsString(), whole.graph().initializer(1).SerializeAsString());
}

} // namespace
