// RUN: colossal-opt %s --dist-apply-plan='strategy=dp=4,tp=2,sp_mode=megatron,zero=1,recompute=selective cluster=dgx-h100' | FileCheck %s
// RUN: colossal-opt %s --dist-apply-plan | FileCheck %s --check-prefix=ONE
// RUN: colossal-opt %s --dist-apply-plan='strategy=dp=64' | FileCheck %s --check-prefix=NODES
// RUN: not colossal-opt %s --dist-apply-plan='strategy=dp=2,tp=two' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: not colossal-opt %s --dist-apply-plan='cluster=no-such-machine' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: colossal-opt %s --dist-apply-plan='strategy=dp=2' | not colossal-opt --dist-apply-plan='strategy=dp=4' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=AGAIN

// The plan on the module, with the nodes its ranks need.
// CHECK: module attributes {dist.plan = #dist.plan<dp = 4, tp = 2, sequence = "megatron", zero = 1, recompute = "selective", cluster = "dgx-h100">}
// ONE: module attributes {dist.plan = #dist.plan<>}
// NODES: #dist.plan<dp = 64, nodes = 8>
// KEY: error: dist-apply-plan: strategy.tp: expected a positive integer
// CLUSTER: error: dist-apply-plan: --cluster 'no-such-machine' is neither a preset nor a readable file
// AGAIN: error: dist-apply-plan: the module is already planned as #dist.plan<dp = 2>, not #dist.plan<dp = 4>
module {}
