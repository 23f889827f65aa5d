// RUN: colossal-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{plan: tp is 0, expected at least 1}}
module attributes {dist.plan = #dist.plan<tp = 0>} {}

// -----

// expected-error @+1 {{plan: zero is 4, expected 0, 1, 2 or 3}}
module attributes {dist.plan = #dist.plan<zero = 4>} {}

// -----

// expected-error @+1 {{plan: sequence is 'ulysses', expected one of none megatron all-to-all ring}}
module attributes {dist.plan = #dist.plan<sequence = "ulysses">} {}

// -----

// expected-error @+1 {{plan: stage_layers has 3 entries for pp x virtual_stages = 2}}
module attributes {dist.plan = #dist.plan<pp = 2, stage_layers = [1, 2, 3]>} {}

// -----

// expected-error @+1 {{plan: every pipeline stage holds at least one layer}}
module attributes {dist.plan = #dist.plan<pp = 2, stage_layers = [4, 0]>} {}

// -----

// expected-error @+1 {{plan: the cluster is unnamed}}
module attributes {dist.plan = #dist.plan<cluster = "">} {}
