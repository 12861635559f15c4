"""`hydra/launcher=slurm` on a machine without SLURM: one clear message instead of submitit's traceback.

submitit fails late, inside the launcher, with a traceback and a half-written multirun
directory; this Hydra callback (configs/hydra/default.yaml) checks before anything is written.
"""

import shutil
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SlurmCheck(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = str(config.hydra.launcher.get("_target_", ""))
        if launcher.endswith(".SlurmLauncher") and shutil.which("sbatch") is None:
            # SystemExit: Hydra turns a callback's exceptions into warnings and goes on.
            raise SystemExit(
                "hydra/launcher=slurm: no SLURM scheduler found here (no `sbatch` on PATH). Submit "
                "from a machine of the cluster that has SLURM's commands (a login node). On this "
                "machine, leave hydra/launcher out to run the jobs one after another, or use "
                "hydra/launcher=submitit_local. To try SLURM on one machine: apt-get install "
                "slurm-wlm munge (Debian, Ubuntu)."
            )
