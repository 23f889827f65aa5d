//===- ShardingRuleInterface.td - einsum-like factor rules -*- tablegen -*-===//

#ifndef COLOSSAL_SHARDING_RULE_INTERFACE
#define COLOSSAL_SHARDING_RULE_INTERFACE

include "mlir/IR/OpBase.td"

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::colossal::train";
  let description = [{
    States how an op's tensor dimensions may be split over mesh axes, as an
    einsum-like factor rule (the idea behind GSPMD, Shardy's OpShardingRule and
    Colossal-Auto's strategy generators).

    A rule is a list of factors, each with a size and a kind:
    - `parallel`: indexes operand and result dimensions alike; splitting it
      needs no communication (the batch factor of a matmul);
    - `reduction`: indexes operands only and is summed over; splitting it
      leaves the result as a pending partial sum (the contracted factor of a
      matmul);
    - `whole`: must stay unsplit unless a special algorithm handles it (the
      softmax axis, the normalised axis of a layer norm, a reshape that mixes
      dimensions that do not factor).

    Each operand and result dimension maps to an ordered list of factors, major
    first (a reshape from [B*S, H] to [B, S, H] maps operand dimension 0 to
    [B, S]). A broadcast (size-1) dimension maps to no factor.
  }];
  let methods = [
    InterfaceMethod<
      "Returns the factor rule of this op.",
      "::colossal::train::ShardingRule", "getShardingRule", (ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::colossal::train::computeShardingRule($_op.getOperation());
      }]>
  ];
}

#endif // COLOSSAL_SHARDING_RULE_INTERFACE
