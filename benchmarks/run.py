"""What a baked project costs, measured: `make bench` (or `python benchmarks/run.py`).

Bakes the default project into a temporary folder, runs it once untimed (which writes the
digits and warms the disk cache), then times, each command in a process of its own:

- start-up: `python train.py --help`;
- end to end: `python train.py trainer.max_epochs=N` against plain_train.py, the same training
  with torch alone;
- throughput: training samples/s in the steady epochs (all but the first) of that same
  `python train.py` (default callbacks and logger), of bare_lightning.py (the project's
  Classifier and DataModule under a bare Trainer) and of plain_train.py, by the wall clock and
  by each process's CPU time.

Each round runs the three trainings once, in a rotating order. Prints a Markdown table: the
median of each figure over the rounds, its range, and the guard rails' verdicts. A measurement,
not a test: on a shared machine, read the range (benchmarks/README.md).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from cookiecutter.main import cookiecutter

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent


def bake(folder: Path) -> Path:
    """The default project in `folder` (with cookiecutter's leftover hook copies, cookiecutter#886)."""
    with mock.patch.object(tempfile, "tempdir", str(folder)):
        return Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(folder)))


def timed(project: Path, env: dict[str, str], *command: str | Path) -> tuple[float, str]:
    """Wall time and standard output of `python *command`, run in `project`."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, *map(str, command)], cwd=project, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"python {' '.join(map(str, command))} failed:\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def measure(
    project: Path, env: dict[str, str], epochs: int, rounds: int, overrides: list[str]
) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    def add_speeds(name: str, wall: list[float], cpu: list[float], samples: int) -> None:
        """Training samples per second in the steady epochs (all but the first, median epoch), by
        the wall clock and by the process's CPU time (which other load moves less)."""
        add(f"{name} samples/s", samples / statistics.median(wall[1:]))
        add(f"{name} samples/cpu s", samples / statistics.median(cpu[1:]))

    def add_timed(name: str, path: Path) -> None:
        timer = json.loads(path.read_text())  # written by bare_lightning.EpochTimer
        add_speeds(name, timer["seconds"], timer["cpu_seconds"], timer["samples"])

    def template() -> None:
        times = project / "template-epochs.json"
        timer = [
            "+callbacks.bench_timer._target_=bare_lightning.EpochTimer",
            f"+callbacks.bench_timer.path={times}",
        ]
        seconds, _ = timed(project, env, "train.py", f"trainer.max_epochs={epochs}", *timer, *overrides)
        add("template s", seconds)
        add_timed("template", times)
        newest = max((project / "logs" / "train" / "runs").glob("*/metrics.json"), key=os.path.getmtime)
        add("template test acc", json.loads(newest.read_text())["test/acc"])

    def plain() -> None:
        seconds, out = timed(project, env, HERE / "plain_train.py", ".", "--epochs", str(epochs))
        add("plain s", seconds)
        epochs_run = re.findall(r"^epoch \d+ ([\d.]+) s ([\d.]+) cpu_s (\d+) samples", out, re.M)
        wall, cpu, samples = zip(*epochs_run, strict=True)
        add_speeds("plain", [float(s) for s in wall], [float(s) for s in cpu], int(samples[0]))
        add("plain test acc", float(re.search(r"^test_acc ([\d.]+)", out, re.M)[1]))

    def bare() -> None:
        times = project / "bare-epochs.json"
        timed(project, env, HERE / "bare_lightning.py", ".", times, f"trainer.max_epochs={epochs}")
        add_timed("bare", times)

    runs: list[Callable[[], None]] = [template, plain, bare]
    for i in range(rounds):
        for run in runs[i % 3 :] + runs[: i % 3]:
            run()
        add("end to end", figures["template s"][-1] / figures["plain s"][-1])
        add("parity", figures["template samples/s"][-1] / figures["bare samples/s"][-1])
        add("cpu parity", figures["template samples/cpu s"][-1] / figures["bare samples/cpu s"][-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of the three trainings")
    parser.add_argument("--starts", type=int, default=5, help="repetitions of `train.py --help`")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of every training (2 or more)")
    parser.add_argument(
        "--threads", type=int, default=1, help="OMP_NUM_THREADS of every run (0: as set outside)"
    )
    parser.add_argument("--quick", action="store_true", help="one of each, 2 epochs: a check")
    parser.add_argument("overrides", nargs="*", help="for train.py alone, e.g. logger=csv: a part's cost")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.starts, args.epochs = 1, 1, 2
    if args.epochs < 2:
        parser.error("--epochs must be 2 or more: the first epoch is not a steady one")

    env = {**os.environ, "PYTHONPATH": f"src{os.pathsep}{HERE}", "WANDB_MODE": "offline"}
    env.pop("PROJECT_ROOT", None)  # logs/ and data/ in the baked project
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        project = bake(Path(folder))
        timed(project, env, "train.py", "debug=fdr")  # writes data/digits, warms the disk cache
        figures = {"start-up s": [timed(project, env, "train.py", "--help")[0] for _ in range(args.starts)]}
        figures.update(measure(project, env, args.epochs, args.rounds, args.overrides))

    command = " ".join(["python train.py", f"trainer.max_epochs={args.epochs}", *args.overrides])
    # label, figure, format, target, guard rail
    rows = [
        ("`python train.py --help`, s", "start-up s", ".2f", "< 0.5", lambda v: v < 0.5),
        (f"`{command}`, s", "template s", ".1f", "", None),
        ("plain_train.py, s", "plain s", ".1f", "", None),
        ("end to end: train.py / plain_train.py", "end to end", ".2f", "<= 2", lambda v: v <= 2),
        ("samples/s: train.py", "template samples/s", ".0f", "", None),
        ("samples/s: bare Lightning Trainer", "bare samples/s", ".0f", "", None),
        ("samples/s: plain loop (for scale)", "plain samples/s", ".0f", "", None),
        ("parity: train.py / bare Lightning samples/s", "parity", ".3f", ">= 0.97", lambda v: v >= 0.97),
        ("the same by CPU time: samples per CPU s", "cpu parity", ".3f", "", None),
        ("test accuracy: train.py", "template test acc", ".3f", "", None),
        ("test accuracy: plain_train.py", "plain test acc", ".3f", "", None),
    ]
    threads = f"OMP_NUM_THREADS={args.threads}" if args.threads else "torch's default threads"
    print(
        f"{datetime.date.today()}, {platform.node()}, {os.cpu_count()} cores, {threads}: "
        f"{args.rounds} round(s) of {args.epochs} epochs, {args.starts} start(s)\n"
    )
    print("| figure | median | range | target | verdict |\n|---|---|---|---|---|")
    for label, key, form, target, passes in rows:
        values = figures[key]
        median = statistics.median(values)
        verdict = "" if passes is None else "ok" if passes(median) else "over"
        spread = f"{min(values):{form}} to {max(values):{form}}"
        print(f"| {label} | {median:{form}} | {spread} | {target} | {verdict} |")


if __name__ == "__main__":
    main()
