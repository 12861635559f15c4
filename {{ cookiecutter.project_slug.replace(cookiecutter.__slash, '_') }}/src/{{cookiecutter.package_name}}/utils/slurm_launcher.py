"""`hydra/launcher=slurm` as a user meets it, where submitit falls short: with no SLURM scheduler, or a
partition the cluster lacks, it fails late (a traceback, a half-written multirun directory); Ctrl+C while
it waits for the jobs said nothing true (they go on); its console never showed the results.

This Hydra callback (configs/hydra/default.yaml) checks before anything is written: the tasks per node
are a number, SLURM's commands are there (`sbatch`), its controller answers (`scontrol ping`), the
partition exists. While the jobs run, Ctrl+C or SIGTERM stops waiting for them (a search's: after
them) and says how to stop them; at the end, the summary.
"""

import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ValidationError

from {{ cookiecutter.package_name }}.utils.multirun import MultirunSummary


def on_slurm(config: DictConfig) -> bool:
    return str(config.hydra.launcher.get("_target_", "")).endswith(".SlurmLauncher")


class SlurmLauncherCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not on_slurm(config):
            return
        try:  # ${trainer.devices}, typed int: auto or a list failed in Hydra's setup, with a traceback
            tasks = config.hydra.launcher.tasks_per_node
        except ValidationError:
            tasks = 0
        if tasks < 1:
            raise SystemExit(
                f"trainer.devices={config.trainer.devices}: on SLURM, one task per device starts on each "
                "node (hydra.launcher.tasks_per_node); accepted: a number, such as trainer.devices=4."
            )
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
        sinfo = ["sinfo", "--all", "--noheader", "--format=%R"]  # every partition's name, hidden ones too
        names = subprocess.run(sinfo, capture_output=True, text=True, timeout=60).stdout.split()
        asked = config.hydra.launcher.get("partition")
        if names and asked and not set(str(asked).split(",")) <= set(names):
            raise SystemExit(  # sbatch would refuse it inside submitit: a traceback, a half-written directory
                f"hydra.launcher.partition={asked}: no such partition on this cluster; accepted: "
                f"{', '.join(names)} (sinfo), or null for the cluster's default."
            )
        if not str(config.hydra.sweeper.get("_target_", "")).endswith(".BasicSweeper"):
            return  # a search (Optuna) stops after the trials running, which it needs to count
        sweep = Path(config.hydra.sweep.dir)

        def stop_waiting(signum: int, frame: Any) -> None:  # submitit names a folder after each job array
            arrays = " ".join(sorted(p.name for p in sweep.glob(".submitit/*") if p.name.isdigit()))
            raise SystemExit(
                f"Stopped waiting for the jobs, which go on: `squeue --me` lists them, `scancel "
                f"{arrays or '<job id>'}` stops them. Their runs and summary.json: {sweep}"
            )

        for signum in (signal.SIGINT, signal.SIGTERM):  # here, not a job: the jobs run on the cluster
            signal.signal(signum, stop_waiting)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if on_slurm(config):  # the jobs' summary, which they wrote and logged in their own output files
            MultirunSummary().on_job_end(config)
