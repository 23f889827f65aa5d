//===- OnnxModel.h - reading and checking ONNX protobufs ---------*- C++ -*-===//
//
// Everything that touches the protobuf representation directly: loading a
// file within bounds, element types, tensor data (inline and external), and
// attributes. The graph importer above it sees checked values only.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_IMPORT_ONNXMODEL_H
#define COLOSSAL_IMPORT_ONNXMODEL_H

#include "HostTensor.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>
#include <vector>

namespace colossal::import {

/// Parses `size` bytes as a ModelProto; `error` says why when it fails.
bool parseModel(const void *data, size_t size, onnx::ModelProto &model, std::string &error);

/// Parses the model file at `path` with the raw data of every initializer
/// of at least `kRawDataLeftInPlaceBytes` left in the file, its offset
/// recorded instead (RawDataInPlace.h): the file is mapped, and a weight's
/// bytes are read only by readTensor. Framing the rewrite does not read is
/// parsed whole. `error` says why it fails, without the path.
bool readModelFile(const std::string &path, onnx::ModelProto &model, std::string &error);

/// Initializers' raw data of at least this many bytes stays in the model
/// file; smaller tensors are not worth a read each.
inline constexpr size_t kRawDataLeftInPlaceBytes = 1024;

/// A tensor whose raw data readModelFile left in the file, with its bytes
/// inline again (for a graph written elsewhere); other tensors unchanged.
bool inlineRawDataLeftInPlace(onnx::TensorProto &tensor, const std::string &baseDir, std::string &error);

/// Bytes per element of an ONNX element type; 0 when unsupported.
int64_t elementByteWidth(int32_t onnxType);
bool isSupportedElementType(int32_t onnxType);

/// Where a tensor's bytes live.
struct TensorDataLocation {
  bool external = false;
  /// Inline raw data left in the model file when its graph was read
  /// (RawDataInPlace.h): external in where it is read from, inline to the user.
  bool inModelFile = false;
  std::string file;  // absolute or relative to the model's folder
  int64_t offset = 0;
  int64_t length = 0;
};

/// Checks that a tensor's shape and data agree (inline field counts, or the
/// external file's extent) without reading external bytes; fills `location`.
bool checkTensorData(const onnx::TensorProto &tensor, const std::string &baseDir,
                     TensorDataLocation &location, std::string &error);

/// Reads a tensor's values (at most `maxElements` elements: constants fold
/// up to kMaxFoldedElements, initial weights may be larger).
std::optional<HostTensor> readTensor(const onnx::TensorProto &tensor, const std::string &baseDir,
                                     std::string &error, int64_t maxElements = kMaxFoldedElements);

/// The dims of a tensor proto, checked to be non-negative and not to overflow.
std::optional<std::vector<int64_t>> tensorShape(const onnx::TensorProto &tensor,
                                                std::string &error);

} // namespace colossal::import

#endif // COLOSSAL_IMPORT_ONNXMODEL_H
