"""The GPT-2 the host benchmarks train: exported by PyTorch with one batch of
token ids and labels as a feed, and the list of its trainable parameters."""
import os

import numpy as np
import torch


def export_gpt2(model, ids, labels, work, name="gpt2.onnx"):
    """Writes WORK/NAME, WORK/feed/{input_ids,labels}.npy and
    WORK/trainable.txt; returns the ONNX path."""
    return export_model(model, {"input_ids": ids, "labels": labels}, work, name)


def export_model(model, inputs, work, name):
    """Any model whose forward takes `inputs` (name -> tensor, in order) and
    returns its loss: WORK/NAME, WORK/feed/INPUT.npy and WORK/trainable.txt;
    returns the ONNX path."""
    onnx_path = os.path.join(work, name)
    torch.onnx.export(model, tuple(inputs.values()), onnx_path, input_names=list(inputs), output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    os.makedirs(os.path.join(work, "feed"))
    for key, value in inputs.items():
        np.save(os.path.join(work, "feed", key + ".npy"), value.numpy())
    with open(os.path.join(work, "trainable.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _ in model.named_parameters()))
    return onnx_path
