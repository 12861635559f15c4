"""Starting a net from another checkpoint's weights, layer by layer where they fit."""

import logging

import torch
from torch import nn

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint
from {{ cookiecutter.package_name }}.utils.errors import ConfigError

log = logging.getLogger(__name__)


def load_matching_weights(net: nn.Module, path: str, prefix: str = "net.") -> dict[str, list[str]]:
    """Copy the weights of the checkpoint at `path` into `net` where name and shape match.

    Returns (and logs) what was `loaded`, what the checkpoint had that does not fit (`skipped`:
    another head, say) and what stays freshly initialized (`new`).
    """
    ckpt = existing_checkpoint(path, key="model.pretrained")
    state = torch.load(ckpt, map_location="cpu", weights_only=True).get("state_dict", {})
    source = {key.removeprefix(prefix): value for key, value in state.items() if key.startswith(prefix)}
    target = net.state_dict()
    loaded = [k for k in target if k in source and source[k].shape == target[k].shape]
    report = {
        "loaded": loaded,
        "skipped": sorted(k for k in source if k not in loaded),
        "new": [k for k in target if k not in loaded],
    }
    if not loaded:
        raise ConfigError(
            f"model.pretrained={path!r}: no layer of the checkpoint fits this net "
            f"(checkpoint layers: {', '.join(sorted(source)[:6]) or 'none'}...). "
            "Pass a checkpoint of the same kind of net."
        )
    net.load_state_dict({k: source[k] for k in loaded}, strict=False)
    log.info("Pretrained weights from %s: %s", ckpt, {name: len(keys) for name, keys in report.items()})
    for name in ("skipped", "new"):
        if report[name]:
            log.info("  %s: %s", name, ", ".join(report[name]))
    return report
