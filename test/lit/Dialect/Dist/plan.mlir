// RUN: colossal-opt %s -split-input-file | colossal-opt -split-input-file | FileCheck %s

// A plan prints only what differs from one rank's defaults, and reads back.
// CHECK: module attributes {dist.plan = #dist.plan<dp = 4, tp = 2, sequence = "megatron", microbatches = 8, zero = 1, recompute = "selective", cluster = "dgx-h100", nodes = 2>}
module attributes {dist.plan = #dist.plan<dp = 4, tp = 2, sequence = "megatron", microbatches = 8, zero = 1, recompute = "selective", cluster = "dgx-h100", nodes = 2>} {}

// -----

// CHECK: module attributes {dist.plan = #dist.plan<>}
module attributes {dist.plan = #dist.plan<dp = 1, zero = 0, cluster = "dgx-a100">} {}

// -----

// Pipelines with uneven stages.
// CHECK: #dist.plan<pp = 2, schedule = "interleaved", virtual_stages = 2, stage_layers = [3, 3, 2, 4]>
module attributes {dist.plan = #dist.plan<pp = 2, schedule = "interleaved", virtual_stages = 2, stage_layers = [3, 3, 2, 4]>} {}

