"""`make bench`: the benchmark runs end to end, and its plain yardstick is torch alone."""

import json
import re
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml
from conftest import TEMPLATE, bake, run
from PIL import Image

BENCHMARKS = TEMPLATE / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))


def test_quick_benchmark_prints_every_figure_and_verdict(tmp_path: Path) -> None:
    result = run(sys.executable, BENCHMARKS / "run.py", "--quick", cwd=tmp_path, TMPDIR=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {
        label: (float(median), verdict)
        for label, median, verdict in re.findall(
            r"^\| ([^|]+?) \| ([\d.]+) \| [\d.]+ to [\d.]+ \| [^|]* \| (ok|over|) \|$", result.stdout, re.M
        )
    }
    assert list(rows) == [
        "`python train.py --help`, s",
        "`--help` of a Hydra app with no config (the floor), s",
        "`python train.py trainer.max_epochs=2`, s",
        "plain_train.py, s",
        "end to end: train.py / plain_train.py",
        "samples/s: train.py",
        "samples/s: bare Lightning Trainer",
        "samples/s: plain loop (for scale)",
        "parity: train.py / bare Lightning samples/s",
        "the same by CPU time: samples per CPU s",
        "an epoch's end (after its last step), ms: train.py",
        "an epoch's end, ms: bare Lightning Trainer",
        "test accuracy: train.py",
        "test accuracy: plain_train.py",
    ], result.stdout
    guard_rails = [label for label, (_, verdict) in rows.items() if verdict]
    assert guard_rails == [
        "`python train.py --help`, s",
        "end to end: train.py / plain_train.py",
        "parity: train.py / bare Lightning samples/s",
    ]
    assert all(median > 0 for median, _ in rows.values())
    # The baked project and cookiecutter's hook copies (tmp*.py) are gone.
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(("bench-", "tmp"))]


def test_timed_processes_train_in_turn_a_step_each(tmp_path: Path) -> None:
    from bare_lightning import EpochTimer

    steps: list[tuple[int, str]] = []
    trainer = SimpleNamespace(train_dataloader=SimpleNamespace(dataset=range(7)), num_training_batches=3)

    def train(turn: int) -> None:
        timer = EpochTimer(str(tmp_path / f"{turn}.json"), str(tmp_path), turn)
        for _ in range(2):
            timer.on_train_epoch_start(trainer, None)
            for batch in range(3):
                timer.on_train_batch_start(trainer, None, batch)
                steps.append((turn, "start"))
                time.sleep(0.01)  # a step: the other one waits
                steps.append((turn, "end"))
                timer.on_train_batch_end(trainer, None, None, None, batch)
            time.sleep(0.02)  # the epoch's end: in its seconds, not in its steps'
        timer.on_train_end(trainer, None)

    both = [threading.Thread(target=train, args=(turn,), daemon=True) for turn in (1, 0)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(timeout=30)
    assert steps == [(turn, moment) for _ in range(6) for turn in (0, 1) for moment in ("start", "end")]
    for turn in (0, 1):
        times = json.loads((tmp_path / f"{turn}.json").read_text())
        assert times["samples"] == 7 and len(times["seconds"]) == len(times["cpu_seconds"]) == 2
        assert all(seconds >= 0.03 for seconds in times["step_seconds"])  # its 3 steps of 10 ms
        steps_and_end = zip(times["step_seconds"], times["seconds"], strict=True)
        assert all(seconds >= steps + 0.02 for steps, seconds in steps_and_end)  # and the end's 20 ms


def test_plain_script_trains_with_torch_alone(tmp_path: Path) -> None:
    project = bake(tmp_path)
    for label in range(2):  # a small image folder in place of the digits
        (project / "data" / "digits" / str(label)).mkdir(parents=True)
        for i in range(10):
            pixels = np.full((8, 8), 10 * i + 120 * label, dtype=np.uint8)
            Image.fromarray(pixels, mode="L").save(project / "data" / "digits" / str(label) / f"{i}.png")
    result = run(
        sys.executable,
        "-X",
        "importtime",
        BENCHMARKS / "plain_train.py",
        project,
        "--epochs",
        "2",
        cwd=project,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    epoch_line = r"^epoch 2 [\d.]+ s [\d.]+ cpu_s 14 samples val_acc [\d.]+$"
    assert re.search(epoch_line, result.stdout, re.M), result.stdout
    assert re.search(r"^test_acc [\d.]+$", result.stdout, re.M)
    imported = {
        line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line
    }
    assert {"torch", "sklearn", "PIL"} <= imported
    forbidden = {
        "lightning",
        "pytorch_lightning",
        "lightning_fabric",
        "hydra",
        "omegaconf",
        "torchmetrics",
        "wandb",
    }
    assert not imported & forbidden


def test_plain_script_trains_as_the_default_config_says(default_project: Path) -> None:
    import plain_train as ours

    configs = next((default_project / "src").glob("*/configs"))

    def read(name: str) -> dict:
        return yaml.safe_load((configs / name).read_text())

    data, model, net = read("data/_common.yaml"), read("model/classifier.yaml"), read("model/net/cnn.yaml")
    split = {key: data[key] for key in ("batch_size", "val_fraction", "test_fraction", "split_seed")}
    assert split == {
        "batch_size": ours.BATCH_SIZE,
        "val_fraction": ours.VAL_FRACTION,
        "test_fraction": ours.TEST_FRACTION,
        "split_seed": ours.SPLIT_SEED,
    }
    assert read("train.yaml")["seed"] == ours.SEED
    assert read("trainer/default.yaml")["max_epochs"] == ours.EPOCHS  # the benchmark's "default run"
    assert model["optimizer"] == {
        "_target_": "torch.optim.AdamW",
        "lr": ours.LR,
        "weight_decay": ours.WEIGHT_DECAY,
    }
    assert {"scheduler": "cosine"} in model["defaults"]
    assert read("model/scheduler/cosine.yaml")["_target_"] == "torch.optim.lr_scheduler.CosineAnnealingLR"
    assert {"width": net["width"], "dropout": net["dropout"]} == {
        "width": ours.WIDTH,
        "dropout": ours.DROPOUT,
    }
