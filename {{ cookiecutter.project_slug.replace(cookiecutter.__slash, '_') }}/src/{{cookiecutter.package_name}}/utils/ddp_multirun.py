"""DDP inside a Hydra multirun: each job gets its own child processes, directory and process group."""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from omegaconf import open_dict, read_write

# What Lightning's DDP launcher puts into the environment of the process that starts the ranks.
LAUNCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


@contextmanager
def multirun_job() -> Iterator[None]:
    """Run one job of a multirun so that DDP works job after job in one process.

    Lightning starts rank k as `python <sys.argv> hydra.run.dir=<hydra.run.dir>`. In a multirun
    sys.argv holds the whole sweep and run.dir is not the job's directory, so every child would
    start the sweep again elsewhere: point both at this job. Afterwards, end the job's process
    group and remove the launch variables, or the next job would reuse a group whose other
    ranks have exited, and, seeing LOCAL_RANK set, would not start its own ranks.
    Outside a multirun it only ends the process group.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        try:
            yield
        finally:
            # Ended explicitly, else a rank can abort at exit ("terminate called without an
            # active exception") while the group's threads are torn down.
            end_process_group()
        return
    hydra_cfg = HydraConfig.get()
    sys.argv = [sys.argv[0], *hydra_cfg.overrides.task]
    with read_write(hydra_cfg), open_dict(hydra_cfg):
        hydra_cfg.run.dir = hydra_cfg.runtime.output_dir
    saved = {key: os.environ.get(key) for key in LAUNCH_VARIABLES}
    try:
        yield
    finally:
        end_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def end_process_group() -> None:
    import torch.distributed

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
