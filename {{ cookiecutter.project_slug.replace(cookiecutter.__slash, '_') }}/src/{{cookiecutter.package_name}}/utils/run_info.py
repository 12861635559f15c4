"""What it takes to reproduce a run, saved beside Hydra's config of each start.

Hydra saves the config and overrides in `.hydra/` (`.hydra/resumed-<time>/` for each resume);
`run_info.json` there adds the command line, the resolved config, the code version, the
software, the machine and the random state.
"""

import json
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

SOURCE_DIR = Path(__file__).resolve().parents[1]


def git_state(directory: Path = SOURCE_DIR) -> dict[str, Any]:
    """The commit of the code that runs, and whether it has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "note": f"{directory} is not in a git checkout (or git is not installed)"}


def cpu() -> str:
    """The CPU's model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def devices() -> list[str]:
    import torch

    if torch.cuda.is_available():
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return [f"{cpu()} ({os.cpu_count()} cores)"]


def run_info(cfg: DictConfig) -> dict[str, Any]:
    import torch

    return {
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": [sys.executable, *sys.argv],
        "cwd": os.getcwd(),
        "seed": cfg.get("seed"),
        "deterministic": OmegaConf.select(cfg, "trainer.deterministic"),
        # What torch actually started from: the seed if one was set, else the random one it drew.
        "torch_initial_seed": torch.initial_seed(),
        "git": git_state(),
        "python": sys.version,
        "packages": packages(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "devices": devices(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }


def packages() -> dict[str, str]:
    """Every installed distribution and its version, by name (case-insensitive order)."""
    # Each `.metadata` (and `.version`) parses the METADATA file anew: read it once per package.
    found = [(meta["Name"] or "", meta["Version"]) for meta in (d.metadata for d in metadata.distributions())]
    return dict(sorted(found, key=lambda item: item[0].lower()))


def save_run_info(cfg: DictConfig) -> Path | None:
    """Write run_info.json into this start's Hydra output folder (the run directory outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    folder = Path(cfg.paths.output_dir)
    if HydraConfig.initialized():
        subdir = HydraConfig.get().output_subdir
        if subdir is None:  # a rank other than 0: rank 0 writes it
            return None
        folder = folder / subdir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run_info.json"
    path.write_text(json.dumps(run_info(cfg), indent=2, default=str) + "\n")
    return path
