//===- RawDataInPlace.h - a model's graph without its weights' bytes -*- C++ -*-===//
//
// Planning needs a model's graph and its tensors' shapes, not the values of
// its weights; parsing a 500 MB export copies every weight into the parsed
// message. This rewrites the protobuf's framing only: each initializer whose
// inline raw data is large names where those bytes lie in the model file
// instead (ONNX's external-data fields, marked as the model file's own), so
// the graph parses in milliseconds and a weight is read, from the file, only
// when something needs its values.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_IMPORT_RAWDATAINPLACE_H
#define COLOSSAL_IMPORT_RAWDATAINPLACE_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace colossal::import {

/// The external-data key that marks bytes left in the model file itself: a
/// size mismatch is then worded as for inline data, and the parameter keeps
/// `data = "initializer"`.
inline constexpr llvm::StringLiteral kRawDataInModelFileKey = "colossal.raw_data_in_model_file";

/// `model` (a serialized ModelProto read from a file called `fileName`) with
/// the raw data of every graph initializer of at least `minBytes` bytes left
/// in place: the tensor records its offset and length in the file instead.
/// nullopt when the framing is not the plain form this rewrites (a field
/// repeated where protobuf would merge it, a wire type out of place, bytes
/// past the end): the caller then parses the whole file, which also words
/// the error.
std::optional<std::string> withRawDataInPlace(llvm::StringRef model, llvm::StringRef fileName, size_t minBytes);

} // namespace colossal::import

#endif // COLOSSAL_IMPORT_RAWDATAINPLACE_H
