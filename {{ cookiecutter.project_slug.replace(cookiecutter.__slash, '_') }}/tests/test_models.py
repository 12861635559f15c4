"""Each net fits any input shape and class count, and each net and experiment trains end to end."""

import warnings
from pathlib import Path

import hydra
import lightning as L
import pytest
import torch
from conftest import QUICK, best_checkpoint, compose_config
from test_configs import options
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from {{ cookiecutter.package_name }}.models.classifier import Classifier
from {{ cookiecutter.package_name }}.train import train
from {{ cookiecutter.package_name }}.utils.runs import ConfigError, named_errors


class TakesPlainValues(torch.nn.Linear):
    """A user's net that hands its arguments to torch as they come (torch refuses OmegaConf's lists)."""

    def __init__(self, input_shape: list[int], num_classes: int, sizes: list[int]) -> None:
        super().__init__(torch.zeros(input_shape).numel(), num_classes)
        assert type(input_shape) is list and type(sizes) is list, (type(input_shape), type(sizes))


SHAPES = [((1, 8, 8), 10), ((3, 16, 16), 3), ((3, 28, 20), 2), ((1, 1, 5), 2), ((4,), 3), ((1, 64), 4)]


@pytest.mark.parametrize("net", options("model/net"))
@pytest.mark.parametrize(("shape", "classes"), SHAPES)
def test_net_maps_each_input_shape_to_logits_or_refuses_it_when_built(
    net: str, shape: tuple, classes: int, tmp_path: Path
) -> None:
    # A net for some shapes only (cnn: images; a 1-D one of yours: sequences) refuses the others when it is
    # built, naming the shape (a ValueError: train.py shows its message), not with torch's error mid-step.
    cfg = compose_config("train", tmp_path, [f"model/net={net}"])
    try:
        with named_errors():  # as train.py builds the model
            model = hydra.utils.instantiate(cfg.model, num_classes=classes, input_shape=list(shape))
    except ConfigError as refused:
        assert isinstance(refused.__cause__, ValueError) and str(list(shape)) in str(refused), refused
        return
    assert model(torch.rand(5, *shape)).shape == (5, classes)


def test_a_net_gets_its_arguments_as_plain_python_values(tmp_path: Path) -> None:
    # input_shape and a list of its own config came as OmegaConf ListConfigs: torch.zeros refused one.
    net = {"_target_": "test_models.TakesPlainValues", "sizes": [4, 2]}
    optimizer = {"_target_": "torch.optim.Adam", "_partial_": True}
    model = Classifier(net=net, optimizer=optimizer, num_classes=3, input_shape=[1, 8, 8])
    assert model(torch.rand(2, 64)).shape == (2, 3)


def test_the_readme_s_optimizer_and_scheduler_swaps_are_configuration(tmp_path: Path) -> None:
    # A key the optimizer's config lacks takes `+` (a walk's `model.optimizer.momentum=0.9` was refused).
    swaps = ["model.optimizer._target_=torch.optim.SGD", "+model.optimizer.momentum=0.9"]
    cfg = compose_config("train", tmp_path, [*swaps, "model/scheduler=step", "model/net=mlp"])  # any shape
    model = hydra.utils.instantiate(cfg.model, input_shape=[1, 8, 8], num_classes=3)
    configured = model.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["momentum"] == 0.9
    assert optimizer.defaults["lr"] == cfg.model.optimizer.lr
    assert type(scheduler) is torch.optim.lr_scheduler.StepLR


def test_the_mlp_scales_inputs_by_their_statistics_from_its_first_epoch() -> None:
    from {{ cookiecutter.package_name }}.models.nets.mlp import MLP

    # A table's column near 750 (wine's proline): averages moved 10% per batch toward it were far off after
    # an epoch of 3 batches, and evaluation used them (a walk's: val/acc 0.33 after 1 epoch, 0.80 after 10).
    rows = torch.randn(178, 3) * torch.tensor([1.0, 10.0, 300.0]) + torch.tensor([0.0, 20.0, 750.0])
    net = MLP(input_shape=[3], num_classes=2)
    for batch in rows.split(64):  # an epoch's training
        net(batch)
    scaled = net.eval().backbone[:2](rows)  # what evaluation gives the first layer
    assert scaled.mean(0).abs().max() < 0.1 and (scaled.std(0) - 1).abs().max() < 0.1, scaled.std(0)


def test_a_metric_added_to_the_classifier_computes_from_its_own_counts() -> None:
    # A probe added top-2 accuracy to the collection: torchmetrics' compute groups, on by default, shared
    # one state among metrics whose states matched after the first batch, and reported F1 from top-2 counts.
    net = {"_target_": "test_models.TakesPlainValues", "sizes": [3]}
    model = Classifier(net=net, optimizer={"_target_": "torch.optim.SGD"}, num_classes=3, input_shape=[3])
    model.val_metrics.add_metrics({"acc_top2": MulticlassAccuracy(3, top_k=2)})
    alone = {"val/f1": MulticlassF1Score(3), "val/acc_top2": MulticlassAccuracy(3, top_k=2)}
    y, generator = torch.tensor([0, 1, 2, 0, 1, 2]), torch.Generator().manual_seed(0)
    for logits in [torch.eye(3)[y], *torch.randn(4, 6, 3, generator=generator)]:  # right first: they agree
        model.val_metrics.update(logits, y)
        for metric in alone.values():
            metric.update(logits, y)
    computed = model.val_metrics.compute()
    assert {n: float(computed[n]) for n in alone} == {n: float(m.compute()) for n, m in alone.items()}


class Trained(L.Callback):
    """Keeps the LightningModule as training left it."""

    model: L.LightningModule | None = None

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        Trained.model = pl_module


def test_a_metric_that_outlives_an_epoch_is_in_its_checkpoints(tmp_path: Path) -> None:
    # Lightning resets the metrics it logs at each epoch's end; a best so far (val_acc_best) carries on, and
    # a resume from an epoch's end takes it from last.ckpt, which holds it only if persistent. A walk's
    # val_f1_best, made without `.persistent(True)`, forgot its best (0.9353 where the run had 0.9372).
    from torchmetrics import Metric

    overrides = [*QUICK, "+callbacks.trained._target_=test_models.Trained", "test=false"]
    train(compose_config("train", tmp_path, overrides))
    restored = Classifier.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    lost = [
        name
        for name, metric in Trained.model.named_modules()
        if isinstance(metric, Metric)
        for state, value in metric.metric_state.items()
        if not torch.equal(one_tensor(value), one_tensor(restored.get_submodule(name).metric_state[state]))
    ]
    assert lost == [], f"{lost}: its state outlives an epoch, and a resume needs it: .persistent(True)"


def one_tensor(state: torch.Tensor | list) -> torch.Tensor:  # a metric's state: a tensor, or a list of them
    if isinstance(state, list):
        return torch.cat([t.flatten() for t in state]) if state else torch.zeros(0)
    return state


@pytest.mark.parametrize("net", options("model/net"))
def test_fast_dev_run_of_each_net(net: str, tmp_path: Path) -> None:
    try:
        metrics = train(compose_config("train", tmp_path, [f"model/net={net}", "debug=fdr"]))
    except ConfigError as refused:  # as the test above checks: a net for inputs of another shape
        pytest.skip(f"model/net={net} takes no inputs of the example data's shape: {refused}")
    assert {"train/loss", "test/acc"} <= metrics.keys()


@pytest.mark.parametrize("experiment", options("experiment"))
def test_fast_dev_run_of_each_experiment(
    experiment: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    overrides = [f"experiment={experiment}", "debug=fdr"]
    if experiment == "finetune":  # it starts from a checkpoint
        overrides.append(f"pretrained={best_checkpoint(request.getfixturevalue('trained_run')[0])}")
    metrics = train(compose_config("train", tmp_path, overrides))
    assert {"train/loss", "test/acc"} <= metrics.keys()


@pytest.mark.parametrize("debug", [o for o in options("debug") if o not in ("default", "overfit")])
def test_each_debug_config_runs(debug: str, tmp_path: Path) -> None:
    assert "test/acc" in train(compose_config("train", tmp_path, [f"debug={debug}", "logger=[]"]))
    if debug == "profiler":  # its table, hundreds of lines wide, in the run directory, not on the console
        assert "run_training_epoch" in (tmp_path / "fit-profile.txt").read_text()


@pytest.mark.slow
def test_overfitting_one_batch_learns_it_by_heart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Its accuracy, not a loss threshold: a loss of yours may not reach 0 (label smoothing's floor is 0.5).
    caplog.set_level("INFO", logger="{{ cookiecutter.package_name }}.train")
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        metrics = train(compose_config("train", tmp_path, ["debug=overfit", "test=false"]))
    assert metrics["train/acc"] == 1.0, metrics
    assert not [w for w in warned if "overfit" in str(w.message)]  # Lightning's "shuffling" (none is)
    assert caplog.records[-1].getMessage() == f"Done: {tmp_path}"  # no test metrics to show
