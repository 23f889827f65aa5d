#!/usr/bin/python3
"""PyTorch's loss of a fixture model on weights a program exported.

  /usr/bin/python3 pytorch_loss.py FIXTURES MODEL WEIGHTS.safetensors FEED_DIR

Builds the fixture's PyTorch module (test/fixtures/models.py), loads every
parameter from the file by its name (load_state_dict, strict about
parameters: a missing or extra name, or another shape, fails), and prints
{"loss": ...} for the feed's batch. Run by checkpoint_programs.py with
Debian's Python, which has torch.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

fixtures, model_name, weights, feed = sys.argv[1:5]
sys.path.insert(0, fixtures)
import models  # noqa: E402
from generate import MODELS  # noqa: E402

data = open(weights, "rb").read()
length = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + length])
DTYPES = {"F32": np.float32, "I64": np.int64}
tensors = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    begin, end = info["data_offsets"]
    array = np.frombuffer(data[8 + length + begin:8 + length + end], dtype=DTYPES[info["dtype"]])
    tensors[name] = torch.from_numpy(array.copy().reshape(info["shape"]))

torch.manual_seed(0)
model = MODELS[model_name]()
state = model.state_dict()
parameters = dict(model.named_parameters())
missing = sorted(set(parameters) - set(tensors))
if missing:
    sys.exit(f"{weights} lacks parameters {missing}")
for name, value in tensors.items():
    if name in state and tuple(state[name].shape) != tuple(value.shape):
        sys.exit(f"{name}: {tuple(value.shape)} in {weights}, {tuple(state[name].shape)} in the module")
state.update({name: value for name, value in tensors.items() if name in state})
model.load_state_dict(state)
reference = json.load(open(f"{fixtures}/{model_name}/reference.json"))
args = [torch.from_numpy(np.load(f"{feed}/{name}.npy")) for name in reference["inputs"]]
with torch.no_grad():
    print(json.dumps({"loss": float(model(*args)), "tensors": len(tensors)}))
