"""Export a checkpoint for serving: `python export.py ckpt_path=PATH format=onnx|torchscript`.

The model goes to <run>/model.onnx or <run>/model.pt with a dynamic batch size; its input
signature, class names and data config are embedded, and written beside it as model.json.
"""

import json
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}


def export(cfg: DictConfig) -> Path:
    """Write the exported model and its model.json; return the model's path."""
    import torch

    from {{ cookiecutter.package_name }}.utils.checkpoints import read_checkpoint
    from {{ cookiecutter.package_name }}.models.classifier import Classifier

    if cfg.format not in SUFFIX:
        raise runs.ConfigError(f"format={cfg.format!r}: accepted formats are {', '.join(SUFFIX)}.")
    config.quiet_console()
    checkpoint = read_checkpoint(cfg.get("ckpt_path"))
    model = Classifier.load_from_checkpoint(cfg.ckpt_path, map_location="cpu", weights_only=True).eval()
    example = torch.zeros(2, *model.hparams.input_shape)
    metadata: dict[str, Any] = {
        "format": cfg.format,
        "input": {"name": "inputs", "shape": ["batch", *example.shape[1:]], "dtype": str(example.dtype)},
        "output": {"name": "logits", "shape": ["batch", len(model.class_names)]},
        "class_names": model.class_names,
        "data": checkpoint.get("resumable", {}).get("data"),
        "checkpoint": str(cfg.ckpt_path),
    }
    path = Path(cfg.paths.output_dir) / f"model{SUFFIX[cfg.format]}"
    if cfg.format == "onnx":
        import onnx

        dynamic = ({0: torch.export.Dim("batch")},)
        model.to_onnx(path, example, dynamo=True, input_names=["inputs"], output_names=["logits"], dynamic_shapes=dynamic)
        exported = onnx.load(path)
        onnx.helper.set_model_props(exported, {"metadata": json.dumps(metadata)})
        onnx.save(exported, path)
    else:
        script = model.to_torchscript(method="trace", example_inputs=example)
        torch.jit.save(script, path, _extra_files={"metadata.json": json.dumps(metadata)})
    path.with_name("model.json").write_text(json.dumps(metadata, indent=2) + "\n")
    log.info(f"Exported: {path}")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="export")
def run_export(cfg: DictConfig) -> None:
    export(cfg)


def main() -> None:
    runs.register_resolvers()
    run_export()


if __name__ == "__main__":
    main()
