//===- LayerDetection.h - finding a model's identical layers -------*- C++ -*-===//
//
// A graph imported from a model file does not say where its layers are, but
// pipelines, recomputation and the estimator's reuse of identical layers
// need them. Exporters emit a model's repeated blocks as the same sequence
// of ops, so the layers are the longest run of consecutive identical blocks
// in op order: op i and op i + P match when they have the same kind, name
// (numbers aside: "layers.3.attn" is "layers.4.attn"), factors, tensor
// layouts and FLOPs, and each input comes either from the
// same relative position (a producer P ops earlier in the previous block),
// from the very same value (a mask or table every layer reads), or, where
// the first block reads the model's stem from further back than one period
// (ops such as BERT's mask arithmetic sit between the stem and the first
// layer), from an op of the same kind inside the previous block.
//
// Among all periods P, the run covering the most ops wins (ties go to the
// shorter period, so a layer is never read as two); it needs at least two
// blocks.
//
// Ops that read only the step's data and constants (a padding mask made
// into additive scores) are skipped while matching: nn.TransformerEncoder
// makes its mask inside the first layer, which would otherwise differ from
// the rest. So is work every layer reads that the exporter or
// common-subexpression elimination left in one layer (the encoder memory
// each nn.TransformerDecoderLayer transposes, merged into one transpose in
// the first): once a run is found, the ops that two of its layers read at
// the same place, and the parameter lookups feeding only them (a T5-style
// position bias), are skipped and the search is repeated while it covers
// more ops. A skipped op between two ops of the layers joins the layer of
// the next one, so each layer stays one run of consecutive ops; the layers'
// ops per layer count the matched ops.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_LAYERDETECTION_H
#define COLOSSAL_COST_LAYERDETECTION_H

#include "colossal/cost/Graph.h"

namespace colossal::cost {

struct DetectedLayers {
  int64_t firstOp = 0;  // the first op of the first layer
  int64_t opsPerLayer = 0; // matched ops per layer (data-only ops aside)
  int64_t layers = 0;   // 0: no repeated block
};

/// Finds the layers and marks them (op.layer, numLayers); ops before and
/// after the layers keep layer -1.
DetectedLayers detectLayers(Graph &graph);

} // namespace colossal::cost

#endif // COLOSSAL_COST_LAYERDETECTION_H
