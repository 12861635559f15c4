"""Multiruns: a summary of their jobs, and DDP jobs one after another in one process."""

import json
import logging
import os
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

log = logging.getLogger(__name__)

# What Lightning's DDP launcher puts into the environment of the process that starts the ranks.
LAUNCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


@contextmanager
def multirun_job() -> Iterator[None]:
    """Let DDP work job after job in a multirun (Lightning alone would break the second job).

    Lightning starts each rank as `python <sys.argv> hydra.run.dir=<hydra.run.dir>`: in a
    multirun, sys.argv is the whole sweep and run.dir not the job's. Both are pointed at the job
    here; afterwards its process group ends and the launch variables go, so the next job starts
    its own ranks.
    """
    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    saved = {key: os.environ.get(key) for key in LAUNCH_VARIABLES}
    if multirun:
        hydra_cfg = HydraConfig.get()
        sys.argv = [sys.argv[0], *hydra_cfg.overrides.task]
        with read_write(hydra_cfg), open_dict(hydra_cfg):
            hydra_cfg.run.dir = hydra_cfg.runtime.output_dir
    try:
        yield
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        for key, value in saved.items() if multirun else ():
            os.environ.pop(key, None) if value is None else os.environ.update({key: value})


class MultirunSummary(Callback):
    """A Hydra callback (configs/hydra/default.yaml): <multirun>/summary.json with each job's
    overrides and metrics, and the mean and spread of every metric (k-fold: the cross-validated result)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        jobs = [
            {
                "dir": file.parent.name,
                "overrides": yaml.safe_load((file.parent / ".hydra" / "overrides.yaml").read_text()),
                "metrics": json.loads(file.read_text()),
            }
            for file in sorted(sweep.glob("*/metrics.json"), key=lambda f: int(f.parent.name))
        ]
        if not jobs:
            return
        metrics = {}
        for key in sorted({k for job in jobs for k in job["metrics"]}):
            values = [v for job in jobs if isinstance(v := job["metrics"].get(key), float)]
            if values:
                spread = statistics.stdev(values) if len(values) > 1 else 0.0
                metrics[key] = {"mean": statistics.fmean(values), "std": spread, "n": len(values)}
        (sweep / "summary.json").write_text(json.dumps({"jobs": jobs, "metrics": metrics}, indent=2) + "\n")
        shown = ", ".join(f"{k} {v['mean']:.4f} ± {v['std']:.4f}" for k, v in metrics.items() if k.startswith("test/"))
        log.info(f"{len(jobs)} jobs; {shown or 'no test metrics'}. Summary: {sweep / 'summary.json'}")
