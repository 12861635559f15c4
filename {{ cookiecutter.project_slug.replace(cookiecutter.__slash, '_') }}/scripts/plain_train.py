"""A plain PyTorch training script: the yardstick of `make bench`'s end-to-end comparison.

`python scripts/plain_train.py SPEC.json` trains the project's net on the tensors saved in the
spec's data file, with torch alone (no Lightning, Hydra, logger or metrics library: their
imports are part of what the comparison measures), then prints the test accuracy. The
benchmark writes the spec from the composed config: the net, optimizer and scheduler configs,
batch size, epochs, seed, device and autocast type.
"""

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def build(config: dict[str, Any], **kwargs: Any) -> Any:
    """The object a `_target_` config describes (what Hydra's instantiate does for flat configs)."""
    module, name = config.pop("_target_").rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**config, **kwargs)


def grad_scaler(device: torch.device, autocast: torch.dtype | None) -> torch.amp.GradScaler | None:
    """fp16 gradients are scaled, and steps with an overflow skipped, as Lightning's 16-mixed does."""
    return torch.amp.GradScaler(device.type) if autocast is torch.float16 else None


def train_step(
    net: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    autocast: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One plain training step (the benchmark's plain loop takes it from here too); the loss."""
    with torch.autocast(x.device.type, dtype=autocast, enabled=autocast is not None):
        loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss


def main(spec: dict[str, Any]) -> None:
    torch.manual_seed(spec["seed"])
    device = torch.device(spec["device"])
    data = torch.load(spec["data"], weights_only=True)
    x, y = (tensor.to(device) for tensor in data["train"])
    net = build(spec["net"]).to(device)
    optimizer = build(spec["optimizer"], params=net.parameters())
    scheduler = build(spec["scheduler"], optimizer=optimizer) if spec["scheduler"] else None
    autocast = getattr(torch, spec["autocast"]) if spec["autocast"] else None
    scaler = grad_scaler(device, autocast)
    for _ in range(spec["max_epochs"]):
        net.train()
        for batch in torch.randperm(len(y), device=device).split(spec["batch_size"]):
            train_step(net, optimizer, x[batch], y[batch], autocast, scaler)
        if scheduler is not None:
            scheduler.step()
    net.eval()
    x, y = (tensor.to(device) for tensor in data["test"])
    batches = zip(x.split(spec["batch_size"]), y.split(spec["batch_size"]), strict=True)
    with torch.no_grad():
        correct = sum(int((net(inputs).argmax(-1) == labels).sum()) for inputs, labels in batches)
    print(f"test accuracy {correct / len(y):.4f}")


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
