//===- DistDialect.td - the dist dialect --------------------*- tablegen -*-===//
//
// The `dist` dialect says how a training program's values lie on and move
// between the ranks of a device mesh.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_DIST_DIALECT
#define COLOSSAL_DIST_DIALECT

include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::colossal::dist";
  let summary = "How values lie on a device mesh and move between its ranks";
  let description = [{
    The partitioning passes split a `train` program over the axes of a mesh
    (`tp`, `sp`, `dp`, ...) and say where a value changes its layout with
    `dist.reshard` (the layouts of `colossal/Dialect/Dist/Layout.h`);
    `train-autodiff` differentiates reshardings into reshardings between the
    dual layouts, and `train-lower-resharding` replaces each with the
    single-axis collectives of this dialect that the cost model priced. The
    runtime runs each collective over the mesh axis's process group.

    Conventions:
    - A value is one rank's part; shapes are per rank.
    - Mesh axes are named by strings; `dist.reshard` carries the sizes of the
      axes its layouts name.
    - Every op is pure: the collectives are data movement the program's
      order places, not side effects.
  }];
  let useDefaultAttributePrinterParser = 1;
}

#endif // COLOSSAL_DIST_DIALECT
