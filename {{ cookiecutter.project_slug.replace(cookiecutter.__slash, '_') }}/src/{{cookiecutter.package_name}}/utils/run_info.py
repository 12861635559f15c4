"""What it takes to reproduce a run, beside Hydra's config of its first start: .hydra/run_info.json."""

import json
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path

from omegaconf import DictConfig

SOURCE = Path(__file__).resolve().parents[1]


def git_state() -> dict[str, object]:
    """The commit of the code that runs, and whether it has uncommitted changes."""
    try:
        git = ["git", "-C", str(SOURCE)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True, check=True)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "note": f"{SOURCE} is not in a git checkout (or git is missing)"}


def save_run_info(cfg: DictConfig, folder: Path) -> None:
    """The command, code version, packages, machine and seed."""
    import torch

    devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    info = {
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": [sys.executable, *sys.argv],
        "cwd": os.getcwd(),
        "seed": cfg.get("seed"),
        "git": git_state(),
        "python": sys.version,
        "packages": {d.metadata["Name"]: d.version for d in metadata.distributions()},
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "devices": devices or [f"{platform.processor() or platform.machine()} ({os.cpu_count()} CPU cores)"],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_info.json").write_text(json.dumps(info, indent=2, default=str) + "\n")
