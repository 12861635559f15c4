"""`hydra/launcher=slurm` where no SLURM scheduler answers: one clear message instead of submitit's traceback.

submitit fails late, inside the launcher, with a traceback and a half-written multirun
directory; this Hydra callback (configs/hydra/default.yaml) checks before anything is written:
SLURM's commands are there (`sbatch`), and its controller answers (`scontrol ping`).
"""

import shutil
import subprocess
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SlurmCheck(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = str(config.hydra.launcher.get("_target_", ""))
        if not launcher.endswith(".SlurmLauncher"):
            return
        why = "no `sbatch` on PATH"
        if shutil.which("sbatch"):  # and the controller answers (a login node's configuration names it)
            try:
                ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=60)
                why = f"`scontrol ping`: {(ping.stdout + ping.stderr).strip()}" if ping.returncode else None
            except (OSError, subprocess.TimeoutExpired) as error:
                why = f"`scontrol ping`: {error}"
        if why:
            # SystemExit: Hydra turns a callback's exceptions into warnings and goes on.
            raise SystemExit(
                f"hydra/launcher=slurm: no SLURM scheduler found here ({why}). Submit from a machine "
                "of the cluster that has SLURM's commands and configuration (a login node). On this "
                "machine, leave hydra/launcher out to run the jobs one after another, or use "
                "hydra/launcher=submitit_local. To try SLURM on one machine: apt-get install "
                "slurm-wlm munge (Debian, Ubuntu)."
            )
