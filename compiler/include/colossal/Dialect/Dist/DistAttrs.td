//===- DistAttrs.td - attributes of the dist dialect --------*- tablegen -*-===//

#ifndef COLOSSAL_DIST_ATTRS
#define COLOSSAL_DIST_ATTRS

include "colossal/Dialect/Dist/DistDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how one rank's part of a value relates to the whole value on the mesh";
  let description = [{
    For each dimension the mesh axes splitting it (major first, joined by
    `*`; `-` when whole), the axes over which the ranks hold pending partial
    sums (`sum(...)`), and the axes over which they hold copies their readers
    use each in their own way (`copies(...)`). An axis named nowhere holds
    the value whole, read the same way everywhere (Layout.h).

    ```mlir
    #dist.sharding<[-, tp, -] sum(dp) copies(sp)>
    ```

    Constraints:
    - every name is a mesh axis name (letters, digits, `_`), each at most
      once in the whole sharding.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$sums, "::mlir::ArrayAttr":$copies);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "const ::colossal::dist::Layout &":$layout)>
  ];
  let extraClassDeclaration = [{
    /// The sharding as a layout (Layout.h).
    ::colossal::dist::Layout getLayout() const;
  }];
}

#endif // COLOSSAL_DIST_ATTRS
