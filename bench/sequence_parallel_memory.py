#!/usr/bin/python3
"""Memory per rank of sequence parallelism on a long sequence, measured by
the emitted programs: all-to-all and ring attention on 2 and 4 ranks of the
sequence axis, against one rank and against Megatron's sequence
parallelism on 2 tensor ranks.

A GPT-2 (vocabulary 2048, hidden 128, 4 heads, 2 layers, sequence 512,
batch 2; the fixture generator's model class) is exported with PyTorch and
compiled for each strategy; each program trains STEPS AdamW steps under
mpirun and reports, from the runtime's memory tracker, the step's
activation peak (beside the compiler's planned one), the model states per
rank and the bytes on its model axis per step. One run, written as JSON.

  bench/sequence_parallel_memory.py COLOSSAL_COMPILE MPIRUN OUT.json
"""
import json
import shutil
import sys

from parallel_runs import exported_gpt2, measure

COMPILER, MPIRUN, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS = 2
VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 2048, 128, 4, 2, 512, 2

work, onnx_path = exported_gpt2(VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH, "colossal-sp-memory-")

runs = {}
for label, ranks, strategy, axis in [("1 rank", 1, None, "sp"),
                                     ("sp=2, all-to-all", 2, "sp=2,sp_mode=all-to-all", "sp"),
                                     ("sp=2, ring", 2, "sp=2,sp_mode=ring", "sp"),
                                     ("sp=4, all-to-all", 4, "sp=4,sp_mode=all-to-all", "sp"),
                                     ("sp=4, ring", 4, "sp=4,sp_mode=ring", "sp"),
                                     ("tp=2, sp_mode=megatron", 2, "tp=2,sp_mode=megatron", "tp")]:
    runs[label] = measure(COMPILER, MPIRUN, onnx_path, work, label, ranks, strategy, STEPS, axis)

json.dump({"benchmark": "sequence_parallel_memory", "model": {"kind": "gpt2", "vocab": VOCAB, "hidden": HIDDEN,
                                                             "heads": HEADS, "layers": LAYERS, "seq": SEQ,
                                                             "batch": BATCH},
           "steps": STEPS, "runs": runs}, open(OUT, "w"), indent=2)
shutil.rmtree(work)
