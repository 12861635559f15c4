"""k-fold cross-validation: disjoint folds around one fixed test set, and a summary across folds."""

import json
from pathlib import Path

import hydra
import pytest
import torch
from conftest import compose_config, run_script


def splits(tmp_path: Path, *overrides: str) -> dict[str, set[int]]:
    """The sample indices of each split, found by matching rows of the full data."""
    datamodule = hydra.utils.instantiate(compose_config("train", tmp_path, list(overrides)).data)
    datamodule.setup("fit")
    inputs, _ = datamodule.load()
    rows = {tuple(row.flatten().tolist()): i for i, row in enumerate(inputs)}
    return {
        name: {rows[tuple(row.flatten().tolist())] for row in split.tensors[0]}
        for name, split in datamodule.splits.items()
    }


def test_folds_are_disjoint_cover_the_data_and_keep_the_test_set(tmp_path: Path) -> None:
    folds = [splits(tmp_path, "data.num_folds=3", f"data.fold={k}") for k in range(3)]
    plain = splits(tmp_path)
    assert all(fold["test"] == plain["test"] for fold in folds)
    vals = [fold["val"] for fold in folds]
    assert not (vals[0] & vals[1] or vals[1] & vals[2] or vals[0] & vals[2])
    for fold in folds:
        assert not fold["train"] & fold["val"]
        assert fold["train"] | fold["val"] == vals[0] | vals[1] | vals[2]


def test_a_fold_out_of_range_is_named(tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, ["data.num_folds=3", "data.fold=3"])
    with pytest.raises(Exception, match=r"data.fold=3: must be null or 0 to 2"):
        hydra.utils.instantiate(cfg.data)


@pytest.mark.slow
def test_cross_validation_multirun_writes_a_summary(tmp_path: Path) -> None:
    result = run_script(
        "train.py", "-m", "data.num_folds=3", "data.fold=0,1,2", "trainer.max_epochs=2", "logger=csv",
        cwd=tmp_path, RUN_NAME="cv",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "logs" / "train" / "multiruns" / "cv"
    summary = json.loads((sweep / "summary.json").read_text())
    accuracies = [json.loads((sweep / str(k) / "metrics.json").read_text())["test/acc"] for k in range(3)]
    assert all(f"data.fold={k}" in job["overrides"] for k, job in enumerate(summary["jobs"]))
    assert summary["metrics"]["test/acc"]["n"] == 3
    assert summary["metrics"]["test/acc"]["mean"] == pytest.approx(sum(accuracies) / 3)
    assert summary["metrics"]["test/acc"]["std"] == pytest.approx(
        torch.tensor(accuracies).std().item(), abs=1e-6
    )
