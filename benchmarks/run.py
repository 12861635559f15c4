"""What a baked project costs, measured: `make bench` (or `python benchmarks/run.py`).

Bakes the default project into a temporary folder, runs it once untimed (which writes the
digits and warms the disk cache), then times:

- start-up: `python train.py --help`, and beside it (in turn) the `--help` of hydra_floor.py, a
  Hydra app with no config of its own: what any Hydra command costs on this machine;
- end to end: `python train.py trainer.max_epochs=N` against plain_train.py, the same training
  with torch alone, each alone;
- throughput: training samples/s in the steady epochs (all but the first) of `python train.py`
  (default callbacks and logger) and of bare_lightning.py (the project's Classifier and
  DataModule under a bare Trainer), run at once and training in turn, a step each (see
  bare_lightning.EpochTimer), by the wall clock and by each process's CPU time; parity is the
  median over the steady epochs of the ratio of the two processes' epochs of the same number.
  plain_train.py's samples/s, alone, for scale.

Each round runs the three measurements once, in a rotating order. Prints a Markdown table: the
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


def together(project: Path, env: dict[str, str], commands: dict[str, list], logs: Path) -> None:
    """`python *command` for every command, all at once in `project`; if one fails, all stop."""
    processes = {}
    for name, command in commands.items():
        with open(logs / f"{name}.log", "w") as log:
            processes[name] = subprocess.Popen(
                [sys.executable, *map(str, command)], cwd=project, env=env, stdout=log, stderr=log
            )
    while True:
        codes = {name: process.poll() for name, process in processes.items()}
        if failed := [name for name, code in codes.items() if code not in (None, 0)]:
            for process in processes.values():
                process.kill()
            log = (logs / f"{failed[0]}.log").read_text()
            raise SystemExit(f"python {commands[failed[0]][0]} failed:\n{log[-3000:]}")
        if None not in codes.values():
            return
        time.sleep(0.5)


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

    def timer(path: Path, turns: Path, turn: int) -> list[str]:
        options = {"_target_": "bare_lightning.EpochTimer", "path": path, "turns": turns, "turn": turn}
        return [f"+callbacks.bench_timer.{key}={value}" for key, value in options.items()]

    def template() -> None:
        seconds, _ = timed(project, env, "train.py", f"trainer.max_epochs={epochs}", *overrides)
        add("template s", seconds)
        newest = max((project / "logs" / "train" / "runs").glob("*/metrics.json"), key=os.path.getmtime)
        add("template test acc", json.loads(newest.read_text())["test/acc"])

    def plain() -> None:
        seconds, out = timed(project, env, HERE / "plain_train.py", ".", "--epochs", str(epochs))
        add("plain s", seconds)
        epochs_run = re.findall(r"^epoch \d+ ([\d.]+) s ([\d.]+) cpu_s (\d+) samples", out, re.M)
        wall, cpu, samples = zip(*epochs_run, strict=True)
        add_speeds("plain", [float(s) for s in wall], [float(s) for s in cpu], int(samples[0]))
        add("plain test acc", float(re.search(r"^test_acc ([\d.]+)", out, re.M)[1]))

    def in_turns() -> None:
        """train.py and bare_lightning.py at once, training in turn, a step each (EpochTimer)."""
        turns = Path(tempfile.mkdtemp(dir=project))
        first = len(figures.get("parity", [])) % 2  # which one starts each pair: alternates
        length = f"trainer.max_epochs={epochs}"
        commands = {
            "template": ["train.py", length, *timer(turns / "template.json", turns, first), *overrides],
            "bare": [HERE / "bare_lightning.py", ".", turns / "bare.json", turns, 1 - first, length],
        }
        together(project, env, commands, turns)
        pair = {name: json.loads((turns / f"{name}.json").read_text()) for name in commands}
        for name, times in pair.items():
            add_speeds(name, times["seconds"], times["cpu_seconds"], times["samples"])
            ends = zip(times["seconds"][1:], times["step_seconds"][1:], strict=True)  # after the last step
            add(f"{name} epoch end ms", 1000 * statistics.median(epoch - steps for epoch, steps in ends))
        for key, figure in (("seconds", "parity"), ("cpu_seconds", "cpu parity")):
            epoch_pairs = zip(pair["bare"][key][1:], pair["template"][key][1:], strict=True)
            add(figure, statistics.median(bare / template for bare, template in epoch_pairs))

    runs: list[Callable[[], None]] = [template, plain, in_turns]
    for i in range(rounds):
        for run in runs[i % 3 :] + runs[: i % 3]:
            run()
        add("end to end", figures["template s"][-1] / figures["plain s"][-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of the three measurements")
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
        figures: dict[str, list[float]] = {"start-up s": [], "hydra floor s": []}
        for _ in range(args.starts):
            figures["start-up s"].append(timed(project, env, "train.py", "--help")[0])
            figures["hydra floor s"].append(timed(project, env, HERE / "hydra_floor.py", "--help")[0])
        figures.update(measure(project, env, args.epochs, args.rounds, args.overrides))

    command = " ".join(["python train.py", f"trainer.max_epochs={args.epochs}", *args.overrides])
    # label, figure, format, target, guard rail
    rows = [
        ("`python train.py --help`, s", "start-up s", ".2f", "< 0.5", lambda v: v < 0.5),
        ("`--help` of a Hydra app with no config (the floor), s", "hydra floor s", ".2f", "", None),
        (f"`{command}`, s", "template s", ".1f", "", None),
        ("plain_train.py, s", "plain s", ".1f", "", None),
        ("end to end: train.py / plain_train.py", "end to end", ".2f", "<= 2", lambda v: v <= 2),
        ("samples/s: train.py", "template samples/s", ".0f", "", None),
        ("samples/s: bare Lightning Trainer", "bare samples/s", ".0f", "", None),
        ("samples/s: plain loop (for scale)", "plain samples/s", ".0f", "", None),
        ("parity: train.py / bare Lightning samples/s", "parity", ".3f", ">= 0.97", lambda v: v >= 0.97),
        ("the same by CPU time: samples per CPU s", "cpu parity", ".3f", "", None),
        ("an epoch's end (after its last step), ms: train.py", "template epoch end ms", ".1f", "", None),
        ("an epoch's end, ms: bare Lightning Trainer", "bare epoch end ms", ".1f", "", None),
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
