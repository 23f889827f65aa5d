#!/usr/bin/python3
"""Memory per rank of tensor parallelism, with and without the vocabulary
split and Megatron's sequence parallelism, measured by the emitted programs.

A GPT-2 (vocabulary 8192, hidden 256, 4 heads, 4 layers, sequence 128,
batch 4; the fixture generator's model class, so its output layer is tied to
the embedding and its attention has a fused QKV projection) is exported with
PyTorch and compiled for 1 rank, for tp=2 and for tp=2 with sp_mode=megatron;
each program trains STEPS AdamW steps under mpirun and reports, from the
runtime's memory tracker, the step's activation peak and the model states
per rank, and its bytes on the tensor axis. The compiler's planned step peak
is recorded beside the measured one. One run, written as JSON.

  bench/tensor_parallel_memory.py COLOSSAL_COMPILE MPIRUN OUT.json
"""
import json
import shutil
import sys

from parallel_runs import exported_gpt2, measure

COMPILER, MPIRUN, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS = 3
VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 8192, 256, 4, 4, 128, 4

work, onnx_path = exported_gpt2(VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH, "colossal-tp-memory-")

runs = {}
for label, ranks, strategy in [("1 rank", 1, None), ("tp=2", 2, "tp=2"), ("tp=2, sp_mode=megatron", 2,
                                                                          "tp=2,sp_mode=megatron")]:
    runs[label] = measure(COMPILER, MPIRUN, onnx_path, work, label, ranks, strategy, STEPS, "tp")

json.dump({"benchmark": "tensor_parallel_memory", "model": {"kind": "gpt2", "vocab": VOCAB, "hidden": HIDDEN,
                                                           "heads": HEADS, "layers": LAYERS, "seq": SEQ,
                                                           "batch": BATCH},
           "steps": STEPS, "runs": runs}, open(OUT, "w"), indent=2)
shutil.rmtree(work)
