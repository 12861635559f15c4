"""Multiruns: DDP in one job after another, and a summary of the jobs at the end."""

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

from {{ cookiecutter.package_name }}.utils.runs import write_json

log = logging.getLogger(__name__)


@contextmanager
def multirun_job(given: list[str]) -> Iterator[None]:
    """Lightning starts DDP ranks as `python <sys.argv> hydra.run.dir=<run.dir>`; in a multirun both
    are the sweep's: point them at this job and its `given` overrides; after it, end the job's ranks."""
    environment = dict(os.environ)
    if HydraConfig.initialized() and (hydra_cfg := HydraConfig.get()).mode.name == "MULTIRUN":
        sys.argv = [sys.argv[0], *given, "hydra.mode=RUN"]  # even where a config sets MULTIRUN
        with read_write(hydra_cfg), open_dict(hydra_cfg):
            hydra_cfg.run.dir = hydra_cfg.runtime.output_dir
    try:
        yield
    finally:
        if (dist := sys.modules.get("torch.distributed")) and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()  # the next job starts as this one did
        os.environ.update(environment)


class MultirunSummary(Callback):
    """A Hydra callback: <multirun>/summary.json, each job's overrides and metrics, their mean and spread."""

    def on_job_end(self, config: DictConfig, **kwargs: Any) -> None:  # a failed job: no on_multirun_end
        if config.hydra.mode.name != "MULTIRUN":  # a single run, or DDP's ranks of a multirun's job
            return
        sweep, jobs, spread = Path(config.hydra.sweep.dir), [], {}
        for f in sorted(sweep.rglob("metrics.json"), key=lambda p: (len(p.parent.name), p.parent.name)):
            overrides = yaml.safe_load((f.parent / ".hydra" / "overrides.yaml").read_text())
            jobs.append({"dir": f.parent.name, "overrides": overrides, "metrics": json.loads(f.read_text())})
{%- if cookiecutter.__optuna == 'True' %}
            if (f.parent / "pruned.json").is_file():  # a trial Optuna stopped early: left out of the means
                jobs[-1] |= {"metrics": {}, "pruned": jobs[-1]["metrics"]}
{%- endif %}
        for key in sorted({key for job in jobs for key in job["metrics"]}):
            if seen := {job["dir"]: v for job in jobs if isinstance(v := job["metrics"].get(key), float)}:
                xs, job = list(seen.values()), max(seen, key=seen.get)  # and the job of the highest
                spread[key] = dict(mean=fmean(xs), std=stdev(xs) if xs[1:] else 0.0, n=len(xs), highest=job)
        shown = "{} {mean:.4f} ± {std:.4f} (highest: job {highest})"  # k folds: their estimate; else the best
        bests = ", ".join(shown.format(k, **v) for k, v in spread.items() if "best" in k)
        write_json(sweep / "summary.json", {"jobs": jobs, "metrics": spread})
        log.info(f"{len(jobs)} jobs; {bests or 'no best-so-far metric'}. Summary: {sweep / 'summary.json'}")
