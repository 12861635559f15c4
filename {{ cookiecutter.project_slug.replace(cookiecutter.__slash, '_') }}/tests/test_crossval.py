"""k-fold cross-validation: one run per fold, and the cross-validated result in the multirun's summary."""

import json
from pathlib import Path

import pytest
import torch
from conftest import run_script


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
