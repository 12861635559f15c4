"""Export a checkpoint for serving: `python export.py ckpt_path=PATH format=onnx|torchscript`.

The model goes to <run>/model.onnx or <run>/model.pt, with a dynamic batch size, its input
signature and class names embedded, and the same next to it as model.json.
"""

import json
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint, load_model
from {{ cookiecutter.package_name }}.utils.errors import ConfigError
from {{ cookiecutter.package_name }}.utils.extras import apply_extras
from {{ cookiecutter.package_name }}.utils.logging_setup import use_hydra_logging
from {{ cookiecutter.package_name }}.utils.startup import before_hydra

before_hydra()

SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}


def export(cfg: DictConfig) -> Path:
    """Write the exported model and its model.json; return the model's path."""
    import torch

    use_hydra_logging()
    model = load_model(cfg.model_class, cfg.ckpt_path).eval()
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("test")
    example = next(iter(datamodule.test_dataloader()))[0][:2]
    metadata: dict[str, Any] = {
        "format": cfg.format,
        "input": {"name": "inputs", "shape": ["batch", *example.shape[1:]], "dtype": str(example.dtype)},
        "output": {"name": "logits", "shape": ["batch", len(model.class_names)]},
        "class_names": model.class_names,
        "checkpoint": cfg.ckpt_path,
    }
    path = Path(cfg.paths.output_dir) / f"model{SUFFIX[cfg.format]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if cfg.format == "onnx":
        import onnx

        batch = torch.export.Dim("batch")
        model.to_onnx(
            path,
            example,
            dynamo=True,
            input_names=["inputs"],
            output_names=["logits"],
            dynamic_shapes=({0: batch},),
        )
        exported = onnx.load(path)
        onnx.helper.set_model_props(exported, {"metadata": json.dumps(metadata)})
        onnx.save(exported, path)
    else:
        script = model.to_torchscript(method="trace", example_inputs=example)
        torch.jit.save(script, path, _extra_files={"metadata.json": json.dumps(metadata)})
    path.with_name("model.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="export")
def main(cfg: DictConfig) -> None:
    cfg.ckpt_path = str(existing_checkpoint(cfg.ckpt_path))
    if cfg.format not in SUFFIX:
        raise ConfigError(f"format={cfg.format!r}: accepted formats are {', '.join(SUFFIX)}.")
    apply_extras(cfg)
    export(cfg)


if __name__ == "__main__":
    main()
