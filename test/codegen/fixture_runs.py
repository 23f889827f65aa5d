"""What the tests and tools/gpu-train-check.sh share about training the
fixtures: the flags that give model_train a fixture's optimizer settings
(reference.json's "hyper_parameters")."""


def optimizer_flags(name, hyper):
    flags = ["--optimizer", name, "--lr", str(hyper["lr"]), "--weight-decay", str(hyper["weight_decay"])]
    for key in ("eps", "momentum", "eta"):
        if key in hyper:
            flags += ["--" + key, str(hyper[key])]
    if "betas" in hyper:
        flags += ["--beta1", str(hyper["betas"][0]), "--beta2", str(hyper["betas"][1])]
    if hyper.get("nesterov"):
        flags.append("--nesterov")
    return flags
