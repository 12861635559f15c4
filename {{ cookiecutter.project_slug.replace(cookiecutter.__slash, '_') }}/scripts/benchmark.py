"""What the template's layers cost: `make bench` (or `python scripts/benchmark.py`).

Prints, and writes to docs/benchmarks.md with a description of the machine:

- parity: the default example trained by the project's pipeline (`train(cfg)` with the default
  config, callbacks and logger) and by a hand-written PyTorch loop with the same net, data
  order, optimizer, schedule, batch size, epochs and seed, alternating A B A B in one process:
  steady-state training samples/s of both (epochs after the first), their ratio with its
  spread, the final training losses of both, and the time the pipeline adds to each epoch;
- work per training step, counted (the same on any machine, however loaded): Python function
  calls, tensor operations and values read into Python (`.item()`, `bool()`: on a GPU each one
  waits for the device), and on a CUDA GPU every wait for it, in the pipeline and the plain loop;
- data path: batches/s of the whole-batch loader against a per-sample DataLoader on the same data;
- start-up: wall time of `train.py --help`, `--cfg job` and a mistyped override (median);
- end to end: wall time of `python train.py` against a plain script doing the same training with
  torch alone (scripts/plain_train.py).

`--trainer gpu` runs the same comparison on a GPU, `--precision bf16-mixed` (or 16-mixed) in mixed precision;
without such a device it says so and skips, writing nothing.
These are measurements, not tests: on a shared, noisy machine, read the spread.
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import hydra  # noqa: E402
import lightning as L  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_module  # noqa: E402
from omegaconf import DictConfig, open_dict  # noqa: E402
from plain_train import grad_scaler, train_step  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from {{ cookiecutter.package_name }}.utils.startup import prepare_hydra  # noqa: E402

prepare_hydra()


def config(run_dir: Path, overrides: list[str]) -> DictConfig:
    """The train config as the command line composes it, writing into `run_dir`."""
    with initialize_config_module(config_module="{{ cookiecutter.package_name }}.configs", version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.extras.print_config = False
    return cfg


# The benchmark's callbacks that the pipeline's runs create (through the config, so each run is
# built as usual), newest last.
CALLBACKS: list[L.Callback] = []


def created(kind: type) -> Any:
    """The callback of this kind that the last run created."""
    return next(callback for callback in reversed(CALLBACKS) if isinstance(callback, kind))


class EpochTimer(L.Callback):
    """Wall time of each training epoch's batches (validation excluded), for the pipeline."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.start = 0.0
        CALLBACKS.append(self)

    @staticmethod
    def _now(pl_module: L.LightningModule) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start = self._now(pl_module)

    def _stop(self, pl_module: L.LightningModule) -> None:
        if self.start:
            self.times.append(self._now(pl_module) - self.start)
            self.start = 0.0

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._stop(pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop(pl_module)


class StepCounter(TorchDispatchMode, L.Callback):
    """Counts the work of full training steps (each epoch's first batch and its last, which starts
    validation, excluded): Python function calls on this thread in the second epoch; tensor
    operations and values read into Python in the third (counting ops makes torch call Python),
    and with CUDA the operations that make the host wait for the GPU (torch's sync debug mode).
    """

    # Training batches an epoch needs: its first and its last are not counted.
    min_batches = 3

    def __init__(self) -> None:
        super().__init__()
        self.calls = self.ops = self.reads = self.steps = 0
        self.syncs: int | None = None  # counted with CUDA only
        self._caught: list[warnings.WarningMessage] = []
        CALLBACKS.append(self)

    def _call(self, frame: FrameType, event: str, arg: Any) -> None:
        self.calls += event == "call"

    def __torch_dispatch__(
        self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        self.ops += 1
        # What `.item()`, `bool()`, `float()` and `int()` of a tensor run.
        self.reads += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))

    def at(self, epoch: int, batch: int, batches: int) -> None:
        """Called as each training batch starts."""
        if epoch == 1 and batch == 1:
            sys.setprofile(self._call)
        elif epoch == 1 and batch == batches - 1:
            sys.setprofile(None)
        elif epoch == 2 and batch == 1:
            self.__enter__()
            self._watch_syncs(True)
        elif epoch == 2 and batch == batches - 1:
            self._watch_syncs(False)
            self.__exit__(None, None, None)
            self.steps = batches - 2

    def _watch_syncs(self, on: bool) -> None:
        """In "warn" mode torch warns at each synchronizing CUDA operation; count those warnings."""
        if not torch.cuda.is_available():
            return
        if on:
            self._watch = warnings.catch_warnings(record=True)
            self._caught = self._watch.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        else:
            torch.cuda.set_sync_debug_mode("default")
            self._watch.__exit__(None, None, None)
            self.syncs = sum("synchronizing" in str(caught.message) for caught in self._caught)

    def per_step(self) -> dict[str, float]:
        counted = ("calls", "ops", "reads", "syncs")
        return {name: getattr(self, name) / self.steps for name in counted if getattr(self, name) is not None}

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.at(trainer.current_epoch, batch_idx, trainer.num_training_batches)


def pipeline(cfg: DictConfig) -> tuple[float, int]:
    """Train with the project's own code; return the final train loss and samples per epoch."""
    from {{ cookiecutter.package_name }}.train import train

    metrics = train(cfg)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    return metrics["train/loss"], len(datamodule.splits["train"])


# The precisions the plain loop trains in as Lightning does, with the autocast type of each.
AUTOCAST = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def device_and_autocast(cfg: DictConfig) -> tuple[torch.device, torch.dtype | None]:
    """The device and precision the pipeline's Trainer picks for this config: `accelerator: auto`
    resolved, and on a CPU `16-mixed` made `bf16-mixed`, as Lightning does."""
    quiet = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
    trainer = L.Trainer(
        accelerator=cfg.trainer.accelerator, devices=1, precision=cfg.trainer.precision, **quiet
    )
    if trainer.precision not in AUTOCAST:
        raise ValueError(
            f"trainer.precision={cfg.trainer.precision}: the plain loop trains in "
            f"{', '.join(AUTOCAST)} only, so the benchmark compares those."
        )
    return trainer.strategy.root_device, AUTOCAST[trainer.precision]


def plain_loop(cfg: DictConfig, counter: StepCounter | None = None) -> tuple[list[float], float, int]:
    """The same training by hand: same net, data order, optimizer, schedule, batch size, epochs, seed."""
    device, autocast = device_and_autocast(cfg)
    scaler = grad_scaler(device, autocast)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = hydra.utils.instantiate(cfg.data)
    net = hydra.utils.instantiate(cfg.model.net)
    datamodule.pin_memory = datamodule.pins_memory(device)  # as the pipeline's trainer has it
    net.to(device)
    optimizer = hydra.utils.instantiate(cfg.model.optimizer, params=net.parameters())
    scheduler = (
        hydra.utils.instantiate(cfg.model.scheduler, optimizer=optimizer) if cfg.model.scheduler else None
    )
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    times: list[float] = []
    for epoch in range(cfg.trainer.max_epochs):
        loader.sampler.set_epoch(epoch)
        net.train()
        loss_sum, count = torch.zeros((), device=device), 0
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for batch, (x, y) in enumerate(loader):
            if counter:
                counter.at(epoch, batch, len(loader))
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = train_step(net, optimizer, x, y, autocast, scaler)
            loss_sum += loss.detach() * len(y)
            count += len(y)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if scheduler is not None:
            scheduler.step()
    return times, float(loss_sum / count), len(datamodule.splits["train"])


def parity(overrides: list[str], rounds: int) -> dict[str, Any]:
    epochs: dict[str, list[float]] = {"pipeline": [], "plain": []}  # median steady epoch, per round
    losses: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            for name in ("pipeline", "plain"):
                # This module's timer, run as a script (__main__) or imported (the tests).
                timer = [f"+callbacks.benchmark_timer._target_={__name__}.EpochTimer"]
                cfg = config(Path(tmp) / f"{name}-{index}", ["test=false", *timer, *overrides])
                if name == "pipeline":
                    losses[name], samples = pipeline(cfg)
                    times = created(EpochTimer).times
                else:
                    times, losses[name], samples = plain_loop(cfg)
                steady = times[1:] or times
                # The median: a burst of load on a shared machine moves it least.
                epochs[name].append(statistics.median(steady))
    rates = {name: [samples / seconds for seconds in values] for name, values in epochs.items()}
    ratios = [a / b for a, b in zip(rates["pipeline"], rates["plain"], strict=True)]
    # What the layers add to each training epoch, in seconds: Lightning's docs quote theirs this way.
    overheads = [a - b for a, b in zip(epochs["pipeline"], epochs["plain"], strict=True)]
    steps = math.ceil(samples / cfg.data.batch_size)
    return {"rates": rates, "ratios": ratios, "losses": losses, "overheads": overheads, "steps": steps}


def work_per_step(overrides: list[str]) -> dict[str, dict[str, float]]:
    """Python calls, tensor operations and values read into Python per training step, counted."""
    counted = {}
    with tempfile.TemporaryDirectory() as tmp:
        counter = [f"+callbacks.benchmark_counter._target_={__name__}.StepCounter"]
        cfg = config(Path(tmp) / "pipeline", ["test=false", "trainer.max_epochs=3", *counter, *overrides])
        pipeline(cfg)
        counted["pipeline"] = created(StepCounter).per_step()
        plain = StepCounter()
        plain_loop(cfg, counter=plain)
        counted["plain"] = plain.per_step()
    return counted


def data_path(overrides: list[str], epochs: int = 20) -> dict[str, float]:
    from torch.utils.data import DataLoader, TensorDataset

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(Path(tmp), overrides)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    whole = datamodule.train_dataloader()
    per_sample = DataLoader(
        TensorDataset(*datamodule.splits["train"].tensors),
        batch_size=cfg.data.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    result = {}
    for name, loader in (("whole batches", whole), ("per-sample DataLoader", per_sample)):
        start, batches = time.perf_counter(), 0
        for _ in range(epochs):
            for _batch in loader:
                batches += 1
        result[name] = batches / (time.perf_counter() - start)
    return result


def wall_times(command: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            # The project's code from this checkout, installed or not; W&B offline.
            env = {"PYTHONPATH": str(ROOT / "src"), "WANDB_MODE": "offline", "PROJECT_ROOT": tmp}
            result = subprocess.run(
                command, cwd=tmp, capture_output=True, text=True, env={**os.environ, **env}
            )
            if result.returncode != 0 and "max_epoch=" not in " ".join(command):
                raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
            times.append(time.perf_counter() - start)
    return times


def startup(repeats: int) -> dict[str, float]:
    train = [sys.executable, str(ROOT / "train.py")]
    commands = {
        "train.py --help": [*train, "--help"],
        "train.py --cfg job": [*train, "--cfg", "job"],
        "train.py trainer.max_epoch=3 (mistyped)": [*train, "trainer.max_epoch=3"],
        "python -c 'import torch, lightning' (for scale)": [sys.executable, "-c", "import torch, lightning"],
    }
    return {name: statistics.median(wall_times(command, repeats)) for name, command in commands.items()}


def plain_spec(overrides: list[str], folder: Path) -> Path:
    """What scripts/plain_train.py trains, from the composed config: the data's train and test
    tensors in a file, and the net, optimizer and scheduler configs, batch size, epochs, seed,
    device and autocast type in a JSON spec."""
    from omegaconf import OmegaConf

    cfg = config(folder, overrides)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    datamodule.setup("test")
    splits = {name: datamodule.splits[name].tensors for name in ("train", "test")}
    torch.save(splits, folder / "data.pt")
    device, autocast = device_and_autocast(cfg)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    spec = {
        **{name: model[name] for name in ("net", "optimizer", "scheduler")},
        **{"batch_size": cfg.data.batch_size, "max_epochs": cfg.trainer.max_epochs, "seed": cfg.seed},
        "device": str(device),
        "autocast": str(autocast).removeprefix("torch.") if autocast else None,
        "data": str(folder / "data.pt"),
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    return folder / "spec.json"


def end_to_end(overrides: list[str], repeats: int) -> dict[str, float]:
    project = wall_times([sys.executable, str(ROOT / "train.py"), *overrides], repeats)
    with tempfile.TemporaryDirectory() as tmp:
        spec = plain_spec(overrides, Path(tmp))
        plain = wall_times([sys.executable, str(ROOT / "scripts" / "plain_train.py"), str(spec)], repeats)
    return {"python train.py": statistics.median(project), "plain PyTorch script": statistics.median(plain)}


def missing_device(accelerator: str) -> str | None:
    """Why the benchmark cannot run on `accelerator` here, or None."""
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        return "this machine has no CUDA GPU"
    if accelerator == "mps" and not torch.backends.mps.is_available():
        return "this machine has no Apple MPS device"
    return None


def machine() -> str:
    from {{ cookiecutter.package_name }}.utils.run_info import cpu

    gpus = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())) or "none"
    python = platform.python_version()
    return f"{cpu()}, {os.cpu_count()} cores; GPU: {gpus}; Python {python}, torch {torch.__version__}"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def work_section(overrides: list[str], steps: int) -> list[str]:
    """The report's section on the work per training step."""
    title = "## Work per training step (counted: the same on any machine, however loaded)\n"
    if steps < StepCounter.min_batches:
        return [
            title,
            f"Not counted: this configuration has {steps} training batches per epoch; counting needs "
            f"at least {StepCounter.min_batches} (a smaller `data.batch_size`).\n",
        ]
    work = work_per_step(overrides)
    extra = work["pipeline"]["reads"] - work["plain"]["reads"]
    rows = {"project pipeline": work["pipeline"], "plain PyTorch loop": work["plain"]}

    def row(name: str, counts: dict[str, float]) -> str:
        syncs = f"{counts['syncs']:g}" if "syncs" in counts else "n/a (no CUDA)"
        return f"| {name} | {counts['calls']:,.0f} | {counts['ops']:,.0f} | {counts['reads']:g} | {syncs} |"

    return [
        title,
        "| | Python function calls | tensor operations | values read into Python | waits for the GPU |",
        "|---|---|---|---|---|",
        *(row(name, counts) for name, counts in rows.items()),
        "",
        f"Values the pipeline reads per step beyond the plain loop's: {extra:g}. Reading a value held "
        "on a GPU waits for the GPU to finish its queued work; the non-finite-loss check reads its "
        "losses together, every 32 steps (`callbacks.stop_on_non_finite_loss.every_n_steps`) and at "
        "each epoch's last batch.\n",
    ]


def report(args: argparse.Namespace, overrides: list[str]) -> str:
    lines = [f"# Benchmarks\n\nMachine: {machine()}  \nOverrides: `{' '.join(overrides) or '(defaults)'}`\n"]

    def emit(section: list[str]) -> None:
        """Add a section to the report, and print it as soon as it is measured."""
        lines.extend(section)
        print("\n".join(section), flush=True)

    result = parity(overrides, args.rounds)
    rates, losses, steps = result["rates"], result["losses"], result["steps"]
    per_step = statistics.median(result["overheads"]) / steps * 1e3
    emit(
        [
            "## Parity with a hand-written loop\n",
            "| | samples/s (median of rounds) | final train loss |",
            "|---|---|---|",
            f"| project pipeline | {statistics.median(rates['pipeline']):,.0f} | {losses['pipeline']:.5f} |",
            f"| plain PyTorch loop | {statistics.median(rates['plain']):,.0f} | {losses['plain']:.5f} |",
            "",
            f"Ratio pipeline/plain: {spread(result['ratios'])} over {args.rounds} rounds (target >= 0.95). "
            f"Losses equal to 5 decimals: {round(losses['pipeline'], 5) == round(losses['plain'], 5)}.\n",
            f"Time the pipeline adds to each training epoch of {steps} steps, in seconds: "
            f"{spread(result['overheads'])}; per step: {per_step:.2f} ms.\n",
        ]
    )

    emit(work_section(overrides, steps))

    data = data_path(overrides)
    speedup = data["whole batches"] / data["per-sample DataLoader"]
    emit(
        [
            "## Data path\n",
            "| loader | batches/s |",
            "|---|---|",
            *(f"| {name} | {rate:,.0f} |" for name, rate in data.items()),
            "",
            f"Whole batches are {speedup:.1f}x faster.\n",
        ]
    )

    times = startup(args.repeats)
    emit(
        [
            "## Start-up (median wall time)\n",
            "| command | seconds |",
            "|---|---|",
            *(f"| `{name}` | {seconds:.2f} |" for name, seconds in times.items()),
            "",
        ]
    )

    e2e = end_to_end(overrides, max(1, args.repeats // 2))
    ratio = e2e["python train.py"] / e2e["plain PyTorch script"]
    emit(
        [
            "## End to end (whole process, median)\n",
            "| command | seconds |",
            "|---|---|",
            *(f"| `{name}` | {seconds:.1f} |" for name, seconds in e2e.items()),
            "",
            f"Ratio: {ratio:.2f} (target <= 2). `python train.py` also validates every epoch, logs and "
            "checkpoints.\n",
        ]
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds of the parity benchmark")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each start-up command")
    parser.add_argument("--trainer", default=None, help="trainer config, e.g. gpu")
    parser.add_argument("--precision", default=None, help="e.g. bf16-mixed")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args, overrides = parser.parse_known_args()
    if args.trainer:
        overrides.append(f"trainer={args.trainer}")
    if args.precision:
        overrides.append(f"trainer.precision={args.precision}")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(Path(tmp), overrides)
    accelerator = cfg.trainer.accelerator
    if missing := missing_device(accelerator):
        print(f"Skipped: trainer.accelerator={accelerator}, and {missing}. Run it where there is one.")
        return
    try:
        device_and_autocast(cfg)  # before anything runs
    except ValueError as error:
        sys.exit(str(error))
    text = report(args, overrides)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"Written to {args.out}")


if __name__ == "__main__":
    main()
