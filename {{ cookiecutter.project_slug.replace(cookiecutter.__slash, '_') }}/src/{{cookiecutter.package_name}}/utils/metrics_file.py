"""The run directory's metrics.json: final metrics as one flat JSON object of floats."""

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def as_floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Convert logged values (tensors, numbers) to plain floats, keys sorted."""
    return {key: float(value) for key, value in sorted(metrics.items())}


def write_metrics(run_dir: str | os.PathLike, metrics: Mapping[str, Any]) -> Path:
    """Write metrics.json atomically: a reader never sees a half-written file.

    Non-finite values are written as null, because JSON has no NaN.
    """
    values = {k: (v if math.isfinite(v) else None) for k, v in as_floats(metrics).items()}
    path = Path(run_dir) / "metrics.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(values, indent=2) + "\n")
    os.replace(tmp, path)
    return path
