//===- FixedBatch.h - the batch size a model file fixes ----------*- C++ -*-===//
//
// PyTorch exports a model without dynamic axes unless asked: every input's
// leading dimension is then the batch the export ran with. The compiler
// must not treat `--batch` as bound when nothing in the file can take it
// (the program would train on another batch than the one asked for), and
// the search must know that the microbatch size is not its to choose.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_IMPORT_FIXEDBATCH_H
#define COLOSSAL_IMPORT_FIXEDBATCH_H

#include "colossal/Import/OnnxImporter.h"

#include "onnx/onnx_pb.h"

#include <optional>

namespace colossal::import {

/// The batch `model` fixes: when no data input (a graph input that is not a
/// parameter or a constant) has a dimension named like "batch" and every
/// data input's leading dimension is the same fixed size. nullopt when the
/// batch is dynamic or the leading sizes say nothing (they differ, or one
/// is dynamic under another name).
std::optional<FixedBatch> fixedBatchOf(const onnx::ModelProto &model, const ImportOptions &options);

} // namespace colossal::import

#endif // COLOSSAL_IMPORT_FIXEDBATCH_H
