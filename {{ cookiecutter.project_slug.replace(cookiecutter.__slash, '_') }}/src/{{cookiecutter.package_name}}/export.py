"""Export for serving: `python export.py ckpt_path=PATH` writes model.onnx (any batch size) and model.json."""

import json
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path="configs", config_name="export")
def export(cfg: DictConfig) -> Path:  # writes model.onnx and model.json; returns the model's path
    config.quiet_console(cfg)  # first: it loads torch and Lightning
    import torch

    from {{ cookiecutter.package_name }}.models.classifier import Classifier

    checkpoint = runs.read_checkpoint(cfg.get("ckpt_path"))
    model = Classifier.load_from_checkpoint(cfg.ckpt_path, map_location="cpu", weights_only=True).eval()
    example = torch.zeros(2, *model.hparams.input_shape)
    inputs = {"name": "inputs", "shape": ["batch", *example.shape[1:]], "dtype": "float32"}  # numpy's name
    metadata = {"input": inputs, "output": {"name": "logits", "shape": ["batch", len(model.class_names)]}}
    metadata |= {"class_names": model.class_names, "data": checkpoint.get("resumable", {}).get("data")}
    names = {"input_names": ["inputs"], "output_names": ["logits"], "dynamo": True, "verbose": False}
    exported = model.to_onnx(None, example, dynamic_shapes=({0: torch.export.Dim("batch")},), **names)
    exported.model.metadata_props["metadata"] = json.dumps(metadata)
    exported.save(path := Path(cfg.paths.output_dir) / "model.onnx", external_data=False)  # one file
    runs.write_json(path.with_name("model.json"), metadata)
    log.info(f"Exported: {path}")
    return path
