"""eval.py (and train.py train=false): a checkpoint alone evaluates on the data it was trained on, as the
training run tested it."""

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import (
    NOISE,
    QUICK,
    as_command,
    best_checkpoint,
    compose_config,
    metrics,
    run_dirs,
    run_script,
    trainer_stop_at,
)

from {{ cookiecutter.package_name }}.eval import evaluate
from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE


def test_eval_reproduces_the_test_metrics_of_training(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run, trained = trained_run
    overrides = [f"ckpt_path={best_checkpoint(run)}"]
    cfg = compose_config("eval", tmp_path, overrides)
    with as_command("eval", overrides):
        result = evaluate(cfg)
    for key in ("test/acc", "test/f1", "test/loss"):
        assert result[key] == pytest.approx(trained[key], abs=1e-6)
    assert metrics(tmp_path) == result
    # The same per-class table and confusion matrix as the training run's test, in eval's run directory.
    assert (tmp_path / "test_per_class.csv").read_text() == (run / "test_per_class.csv").read_text()
    assert (tmp_path / "confusion_matrix.png").read_bytes().startswith(b"\x89PNG")
    # None kept open by pyplot (each stayed: matplotlib warned past 20, in a multirun of 21 jobs)
    assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()


def test_the_last_epoch_s_validation_metrics_are_its_weights_alone(
    trained_run: tuple[Path, dict[str, float]],
) -> None:
    # Metrics that accumulate over epochs (a metric never reset) reported a mix of every epoch's weights:
    # only a resume test noticed (a probe). The last epoch's are what a validation of last.ckpt gives.
    import hydra
    import lightning as L
    from omegaconf import OmegaConf

    from {{ cookiecutter.package_name }}.models.classifier import Classifier

    run, trained = trained_run
    model = Classifier.load_from_checkpoint(run / "checkpoints" / "last.ckpt", weights_only=True)
    datamodule = hydra.utils.instantiate(OmegaConf.load(run / "config.yaml").data)
    trainer = L.Trainer(logger=False, enable_progress_bar=False)  # the run's device: a GPU's kernels differ
    (fresh,) = trainer.validate(model, datamodule=datamodule, verbose=False)
    for key in ("val/acc", "val/f1", "val/loss"):
        assert fresh[key] == pytest.approx(trained[key], abs=1e-6), key


def test_train_false_tests_the_checkpoint_at_ckpt_path(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run, trained = trained_run
    checkpoint = f"ckpt_path={best_checkpoint(run)}"
    result = run_script("train.py", "train=false", checkpoint, "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [word for word in NOISE if word in result.stdout + result.stderr], result.stderr
    (test_run,) = run_dirs(tmp_path / "logs" / "train")
    for key in ("test/acc", "test/f1", "test/loss"):  # the trained weights, not a new model's
        assert metrics(test_run)[key] == pytest.approx(trained[key], abs=1e-6)
    assert not list(test_run.glob("checkpoints/*.ckpt"))


@pytest.mark.parametrize("signal", ["SIGTERM", "SIGINT"])
def test_eval_stopped_by_a_signal_exits_75_and_writes_no_metrics(
    signal: str, trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    # Lightning ends a test on SIGTERM with exit status 0 (a preempted job would pass for complete), on
    # Ctrl+C with 1 (a failure: a probe's).
    run, _ = trained_run
    checkpoint = f"ckpt_path={best_checkpoint(run)}"
    stop = trainer_stop_at("on_test_batch_end", tmp_path, signal)  # the first: batches of 2, a next one due
    stopped = run_script("eval.py", checkpoint, stop, "+data.batch_size=2", cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (eval_run,) = run_dirs(tmp_path / "logs" / "eval")
    assert not (eval_run / "metrics.json").exists()


@pytest.mark.slow
def test_the_eval_command_writes_its_own_run(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run, trained = trained_run
    result = run_script("eval.py", f"ckpt_path={best_checkpoint(run)}", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [word for word in NOISE if word in result.stdout + result.stderr], result.stderr
    (eval_run,) = run_dirs(tmp_path / "logs" / "eval")
    assert metrics(eval_run)["test/acc"] == pytest.approx(trained["test/acc"], abs=1e-6)
    assert f"test/acc {trained['test/acc']:.4f}" in result.stdout and f": {eval_run}\n" in result.stdout


@pytest.mark.slow
def test_a_checkpoint_from_another_machine_predicts_and_evaluates_on_its_data_moved(tmp_path: Path) -> None:
    # Its data config names the data where the sender had it: a walk's eval.py and predict.py failed there
    # ("Not a directory"), naming no setting; predict.py reads no data, yet the digits were written there.
    trained = run_script("train.py", *QUICK, f"paths.data_dir={tmp_path / 'sender'}", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    data, checkpoint = yaml.safe_load((run / "config.yaml").read_text())["data"], best_checkpoint(run)
    key = "root" if "root" in data else "path"  # the digits' folder of images, the blobs' table
    inputs = shutil.move(data[key], tmp_path / (name := Path(data[key]).name))
    shutil.rmtree(tmp_path / "sender")
    (tmp_path / "sender").write_text("a file: no folder can be made in its place")
    predicted = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={inputs}", cwd=tmp_path)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    (predictions,) = (tmp_path / "logs" / "predict").glob("runs/*/predictions.csv")
    assert len(predictions.read_text().splitlines()) > 1000  # 1,797 images, 2,000 rows
    refused = run_script("eval.py", f"ckpt_path={checkpoint}", cwd=tmp_path)
    assert refused.returncode == 1 and str(tmp_path / "sender") in refused.stderr, refused.stderr[-3000:]
    assert "(the checkpoint's data config; moved? ++data.root=, ++data.path=)" in refused.stderr
    here = f"++data.{key}={tmp_path / 'here' / name}"  # the example's data: made there
    evaluated = run_script("eval.py", f"ckpt_path={checkpoint}", here, QUICK[4], cwd=tmp_path)  # as trained
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    tested = {key: value for key, value in metrics(run).items() if key.startswith("test/")}
    assert metrics(run_dirs(tmp_path / "logs" / "eval")[-1]) == pytest.approx(tested, abs=1e-6)
