//===- OnnxWeights.h - trained weights put back into an ONNX graph -*- C++ -*-===//
//
// The compiler leaves the model's graph without its weights beside the
// program (graph.onnx); `--export` appends the trained ones as initializers.
// Only the protobuf wire format's framing is needed for that: the model's
// fields are copied as they are, the graph field's length is rewritten, and
// each weight is a TensorProto of dims, data type, name and raw little-endian
// bytes. No protobuf library: the runtime stays free of the compiler's
// dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_IO_ONNXWEIGHTS_H
#define COLOSSAL_RUNTIME_IO_ONNXWEIGHTS_H

#include "colossal/runtime/io/Safetensors.h"

#include <string>
#include <vector>

namespace colossal::rt {

/// Writes the ONNX model `graphPath` with `weights` (float32 or int64)
/// appended to its graph's initializers as `outPath`, atomically; an error
/// names the file and what is wrong with it.
void writeOnnxWithWeights(const std::string &graphPath, const std::vector<TensorView> &weights,
                          const std::string &outPath);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_IO_ONNXWEIGHTS_H
