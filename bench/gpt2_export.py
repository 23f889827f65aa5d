"""The GPT-2 the host benchmarks train: exported by PyTorch with one batch of
token ids and labels as a feed, and the list of its trainable parameters."""
import os

import numpy as np
import torch


def export_gpt2(model, ids, labels, work, name="gpt2.onnx"):
    """Writes WORK/NAME, WORK/feed/{input_ids,labels}.npy and
    WORK/trainable.txt; returns the ONNX path."""
    onnx_path = os.path.join(work, name)
    torch.onnx.export(model, (ids, labels), onnx_path, input_names=["input_ids", "labels"], output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    os.makedirs(os.path.join(work, "feed"))
    np.save(os.path.join(work, "feed", "input_ids.npy"), ids.numpy())
    np.save(os.path.join(work, "feed", "labels.npy"), labels.numpy())
    with open(os.path.join(work, "trainable.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _ in model.named_parameters()))
    return onnx_path
