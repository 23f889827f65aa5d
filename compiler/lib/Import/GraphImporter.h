//===- GraphImporter.h - state shared by the node importers -----*- C++ -*-===//

#ifndef COLOSSAL_IMPORT_GRAPHIMPORTER_H
#define COLOSSAL_IMPORT_GRAPHIMPORTER_H

#include "HostTensor.h"
#include "OnnxModel.h"
#include "colossal/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <set>

namespace colossal::import {

/// A value of the ONNX graph: an IR value, a host constant, or both (a
/// constant is materialised in the IR only when a non-folded op uses it).
struct GraphValue {
  mlir::Value value;
  std::optional<HostTensor> constant;
  /// Set for a model parameter, read with train.param where first used.
  mlir::Type parameterType;
};

class GraphImporter;

/// What a node importer sees: its node, its inputs and its attributes.
class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node, mlir::Location loc)
      : importer(importer), node(node), loc(loc) {}

  const onnx::NodeProto &node;
  mlir::Location loc;

  int numInputs() const { return node.input_size(); }
  /// An optional input is absent when missing or named "".
  bool hasInput(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  bool hasOutput(int i) const { return i < node.output_size() && !node.output(i).empty(); }
  /// The input as an IR value (materialising a constant); null after an error.
  mlir::Value input(int i);
  mlir::RankedTensorType inputType(int i);
  /// The input's host value when it is a known constant.
  const HostTensor *constantInput(int i);
  /// A constant input the op requires (a shape, axes, sizes); errors if not.
  const HostTensor *requireConstant(int i, llvm::StringRef what);

  bool hasAttr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t fallback) const;
  float attrFloat(llvm::StringRef name, float fallback) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef fallback) const;
  std::optional<std::vector<int64_t>> attrInts(llvm::StringRef name) const;
  const onnx::AttributeProto *attr(llvm::StringRef name) const;

  void setOutput(int i, mlir::Value value);
  void setOutputConstant(int i, HostTensor constant);

  /// Creates a train op, inferring its result types; on a shape or type
  /// error, reports it against this node and returns null.
  mlir::Operation *create(llvm::StringRef opName, mlir::ValueRange operands,
                          llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
                          unsigned numResults = 1);
  /// Creates an op with an explicit result type (reshape, broadcast).
  mlir::Operation *createTyped(llvm::StringRef opName, mlir::ValueRange operands,
                               mlir::Type resultType);

  mlir::LogicalResult fail(const llvm::Twine &reason);

  mlir::OpBuilder &builder();
  mlir::MLIRContext *context();
  int64_t opset() const;
  /// A number no other random op of the model has (its dropout site): 1,
  /// 2, ... in graph order (0 is an op written without one).
  int64_t nextRandomSite();

private:
  GraphImporter &importer;
};

using NodeImportFn = mlir::LogicalResult (*)(NodeContext &);

/// An op's translation and how many inputs its schema takes; the count is
/// checked before the translation runs, so no translation reads an input
/// the node does not have.
struct NodeImporter {
  NodeImportFn import;
  int minInputs;
  int maxInputs;
};
constexpr int kVariadic = std::numeric_limits<int>::max();

/// The per-op translation table (NodeImporters.cpp).
const llvm::StringMap<NodeImporter> &nodeImporters();

/// ONNX ops built from other train ops (ComposedImporters.cpp):
/// LessOrEqual (`less`) or GreaterOrEqual, and Tile.
mlir::LogicalResult importComparisonOrEqual(NodeContext &ctx, bool less);
mlir::LogicalResult importTile(NodeContext &ctx);

/// Initializers (by name) with a differentiable path to the loss, computed on
/// the ONNX graph before import (Trainability.cpp).
std::set<std::string> initializersReachingLoss(const onnx::GraphProto &graph);

/// False for a tensor type with more than kMaxTensorElements elements.
bool isReasonableType(mlir::Type type);

/// The IR element type of an ONNX element type.
mlir::Type elementTypeOf(mlir::MLIRContext *context, int32_t onnxType);
ElementKind elementKindOf(mlir::Type type);

/// A dense attribute holding a host constant as IR type `type`.
mlir::DenseElementsAttr denseAttrOf(const HostTensor &constant, mlir::RankedTensorType type);

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const onnx::ModelProto &model,
                std::string displayName, std::string baseDir, const ImportOptions &options);

  mlir::OwningOpRef<mlir::ModuleOp> run();

  // Used by NodeContext.
  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  llvm::StringMap<GraphValue> values;
  std::string displayName;
  int64_t opsetVersion = 0;
  /// Random ops numbered so far, in graph order.
  int64_t randomSites = 0;

  mlir::Value materialize(llvm::StringRef name, mlir::Location loc);
  mlir::LogicalResult nodeError(const onnx::NodeProto &node, const llvm::Twine &reason);
  mlir::LogicalResult modelError(const llvm::Twine &reason);

private:
  mlir::LogicalResult checkOpsets();
  mlir::LogicalResult checkSupportedOps();
  mlir::LogicalResult declareInputsAndParameters(mlir::ModuleOp module,
                                                 llvm::SmallVectorImpl<mlir::Type> &argTypes,
                                                 llvm::SmallVectorImpl<std::string> &argNames);
  mlir::FailureOr<mlir::RankedTensorType> graphInputType(const onnx::ValueInfoProto &input);
  mlir::LogicalResult importNodes();
  mlir::LogicalResult checkInputCount(const onnx::NodeProto &node, const NodeImporter &importer);
  mlir::LogicalResult importOutputs(mlir::func::FuncOp function);

  const onnx::ModelProto &model;
  std::string baseDir;
  const ImportOptions &options;
  mlir::Location fileLoc;
};

} // namespace colossal::import

#endif // COLOSSAL_IMPORT_GRAPHIMPORTER_H
