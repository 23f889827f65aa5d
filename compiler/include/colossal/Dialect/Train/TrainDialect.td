//===- TrainDialect.td - the train dialect ------------------*- tablegen -*-===//
//
// The `train` dialect is the program the compiler works on between import and
// partitioning: a model's forward computation and loss over static shapes,
// with parameters referenced by name (their bytes stay in the model file).
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TRAIN_DIALECT
#define COLOSSAL_TRAIN_DIALECT

include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::colossal::train";
  let summary = "A training program over static shapes, parameters by name";
  let description = [{
    The `train` dialect holds what the importer produces from an ONNX training
    export and what the later phases (raising, autodiff, planning,
    partitioning) rewrite.

    Conventions:
    - Every value is a ranked tensor with a static shape; dynamic axes of the
      model are bound at import time.
    - Parameters are module-level symbols (`train.parameter`) read with
      `train.param`; their data is never copied into the IR.
    - Shape arithmetic is folded away at import: attributes such as `axes`,
      `perm` and result shapes are constants, never operands.
    - Each op states how its dimensions may be split across devices through
      the `ShardingRuleOpInterface` (an einsum-like factor rule).
  }];
  // Partitioned programs move values between ranks with dist ops.
  let dependentDialects = ["::colossal::dist::DistDialect"];
  let useDefaultAttributePrinterParser = 0;
  let hasConstantMaterializer = 1;
}

#endif // COLOSSAL_TRAIN_DIALECT
