"""Checkpoints written whole or not at all: write a temporary file beside it, then rename it."""

import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO


class AtomicCheckpointIO(TorchCheckpointIO):
    """Like Lightning's default, but a kill during the write always leaves the previous file intact.

    Lightning writes a local checkpoint to the system's temporary directory and moves it into
    place; where that directory is on another filesystem (node-local /tmp, shared logs/) the move
    is a copy, which a kill can cut short. Here the temporary file `.<name>.tmp-<pid>` is in the
    same directory, so the rename is atomic; a leftover one is only ever a partial write.
    Remote paths (s3://, ...) keep Lightning's way.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        if "://" in str(path) or storage_options is not None:
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as file:
                torch.save(checkpoint, file)
                file.flush()
                os.fsync(file.fileno())  # on disk before it replaces the old one
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
