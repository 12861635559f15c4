"""At the end of a multirun: the mean and spread of every metric across its jobs, in summary.json.

For k-fold cross-validation (`-m data.fold=0,1,2,3,4`) that is the cross-validated result;
for any other sweep, a table of what each job reached.
"""

import json
import logging
import math
import statistics
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def summarize(sweep_dir: Path) -> dict[str, Any]:
    """Read each job's metrics.json and overrides below `sweep_dir`; return the summary."""
    jobs = []
    for metrics_file in sorted(sweep_dir.glob("*/metrics.json"), key=lambda p: _job_number(p.parent)):
        overrides_file = metrics_file.parent / ".hydra" / "overrides.yaml"
        overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
        metrics = json.loads(metrics_file.read_text())
        jobs.append({"dir": metrics_file.parent.name, "overrides": overrides, "metrics": metrics})
    metrics: dict[str, Any] = {}
    keys = sorted({key for job in jobs for key in job["metrics"]})
    for key in keys:
        values = [job["metrics"][key] for job in jobs if _finite(job["metrics"].get(key))]
        if values:
            metrics[key] = {
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "min": min(values),
                "max": max(values),
                "n": len(values),
            }
    return {"jobs": jobs, "metrics": metrics}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _job_number(job_dir: Path) -> int:
    return int(job_dir.name) if job_dir.name.isdigit() else -1


class MultirunSummary(Callback):
    """A Hydra callback (configs/hydra/default.yaml) writing <multirun dir>/summary.json."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        summary = summarize(sweep_dir)
        if not summary["jobs"]:
            return
        path = sweep_dir / "summary.json"
        path.write_text(json.dumps(summary, indent=2) + "\n")
        tests = {k: v for k, v in summary["metrics"].items() if k.startswith("test/")}
        shown = ", ".join(f"{k} {v['mean']:.4f} ± {v['std']:.4f}" for k, v in tests.items())
        log.info(f"{len(summary['jobs'])} jobs; {shown or 'no test metrics'}. Summary: {path}")
