"""What the tests and tools/gpu-train-check.sh share about training the
fixtures: the flags that give model_train a fixture's optimizer settings
(reference.json's "hyper_parameters"), and a reader of the checkpoints it
writes."""
import array
import json
import struct


def safetensors(path):
    """The float32 tensors of a safetensors file, by name."""
    data = open(path, "rb").read()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = array.array("f", data[8 + length + begin:8 + length + end])
    return tensors


def optimizer_flags(name, hyper):
    """`name` is a reference's optimizer: lamb, adamw, sgd, lars, or
    sgd_plain (SGD without momentum)."""
    runtime = "sgd" if name == "sgd_plain" else name
    flags = ["--optimizer", runtime, "--lr", str(hyper["lr"]), "--weight-decay", str(hyper["weight_decay"])]
    for key in ("eps", "momentum", "eta"):
        if key in hyper:
            flags += ["--" + key, str(hyper[key])]
    if "betas" in hyper:
        flags += ["--beta1", str(hyper["betas"][0]), "--beta2", str(hyper["betas"][1])]
    if hyper.get("nesterov"):
        flags.append("--nesterov")
    return flags
