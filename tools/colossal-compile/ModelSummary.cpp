//===- ModelSummary.cpp - the one-screen summary of an imported model -----===//

#include "ModelSummary.h"

#include "colossal/Dialect/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;

namespace colossal {

static std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

static std::string humanCount(int64_t n) {
  if (n >= 1000000000)
    return llvm::formatv("{0:f2}B", n / 1e9).str();
  if (n >= 1000000)
    return llvm::formatv("{0:f2}M", n / 1e6).str();
  if (n >= 1000)
    return llvm::formatv("{0:f1}K", n / 1e3).str();
  return std::to_string(n);
}

static std::string humanBytes(int64_t n) {
  if (n >= (1ll << 30))
    return llvm::formatv("{0:f2} GiB", n / double(1ll << 30)).str();
  if (n >= (1 << 20))
    return llvm::formatv("{0:f2} MiB", n / double(1 << 20)).str();
  if (n >= 1024)
    return llvm::formatv("{0:f1} KiB", n / 1024.0).str();
  return llvm::formatv("{0} B", n).str();
}

void printModelSummary(ModuleOp module, StringRef modelPath, llvm::raw_ostream &os) {
  os << "model " << modelPath << "\n";
  auto function = module.lookupSymbol<func::FuncOp>("forward");
  if (function) {
    os << "inputs:\n";
    for (auto [i, arg] : llvm::enumerate(function.getArguments())) {
      auto name = function.getArgAttrOfType<StringAttr>(i, "train.name");
      os << llvm::formatv("  {0,-24} {1}\n", name ? name.getValue() : "?",
                          typeString(arg.getType()));
    }
    os << "outputs:\n";
    for (auto [i, type] : llvm::enumerate(function.getResultTypes())) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "train.name");
      os << llvm::formatv("  {0,-24} {1}{2}\n", name ? name.getValue() : "?", typeString(type),
                          i == 0 ? "  (loss)" : "");
    }
  }

  int64_t trainableCount = 0, frozenCount = 0, trainableBytes = 0, frozenBytes = 0,
          tensors = 0, shapeOnly = 0;
  SmallVector<train::ParameterOp> parameters;
  for (auto parameter : module.getOps<train::ParameterOp>()) {
    RankedTensorType type = parameter.getTensorType();
    int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
    (parameter.getTrainable() ? trainableCount : frozenCount) += type.getNumElements();
    (parameter.getTrainable() ? trainableBytes : frozenBytes) += bytes;
    shapeOnly += parameter.getData() == "none";
    ++tensors;
    parameters.push_back(parameter);
  }
  os << llvm::formatv("parameters: {0} tensors, {1} trainable ({2}), {3} frozen ({4}){5}\n",
                      tensors, humanCount(trainableCount), humanBytes(trainableBytes),
                      humanCount(frozenCount), humanBytes(frozenBytes),
                      shapeOnly ? llvm::formatv(", {0} shape-only", shapeOnly).str() : "");
  // The largest parameters say most about a model; list those first.
  llvm::sort(parameters, [](train::ParameterOp a, train::ParameterOp b) {
    int64_t na = a.getTensorType().getNumElements(), nb = b.getTensorType().getNumElements();
    return na != nb ? na > nb : a.getSymName() < b.getSymName();
  });
  constexpr size_t kShown = 10;
  for (auto parameter : ArrayRef(parameters).take_front(kShown))
    os << llvm::formatv("  {0,-40} {1,-24} {2}\n", parameter.getSymName(),
                        typeString(parameter.getType()),
                        parameter.getTrainable() ? "trainable" : "frozen");
  if (parameters.size() > kShown)
    os << llvm::formatv("  ... {0} more\n", parameters.size() - kShown);

  std::map<std::string, int> histogram;
  int total = 0;
  module.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "train" &&
        !llvm::isa<train::ParameterOp>(op)) {
      ++histogram[op->getName().stripDialect().str()];
      ++total;
    }
  });
  std::vector<std::pair<int, std::string>> sorted;
  for (auto &[name, count] : histogram)
    sorted.push_back({-count, name});
  std::sort(sorted.begin(), sorted.end());
  os << "ops: " << total << "\n ";
  int column = 1;
  for (auto &[negCount, name] : sorted) {
    std::string item = llvm::formatv(" {0} {1}", name, -negCount).str();
    if (column + item.size() > 96) {
      os << "\n ";
      column = 1;
    }
    os << item;
    column += item.size();
  }
  os << "\n";
}

} // namespace colossal
