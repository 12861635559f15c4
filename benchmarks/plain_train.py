"""The plain PyTorch yardstick of the benchmark: `python plain_train.py PROJECT [--epochs N]`.

Trains a baked project's SmallCNN (imported from PROJECT/src) on the digits it wrote as PNG files
(PROJECT/data/digits, read per sample like the project does, with the same stratified split),
with the template's default batch size, optimizer, schedule and seed: it validates every epoch
and tests at the end, like `python train.py`. torch alone, with no Lightning, Hydra, OmegaConf,
torchmetrics or W&B: their imports are part of what the benchmark compares.

Prints `epoch <n> <seconds> s <seconds> cpu_s <samples> samples val_acc <acc>` per epoch (wall
and CPU seconds from the epoch's start to the next one's: training and validation), then
`test_acc <acc>`.
"""

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, Dataset, Subset

# The template's defaults: configs/data/_common.yaml, model/classifier.yaml, model/net/cnn.yaml, train.yaml,
# trainer/default.yaml (tests/test_benchmarks.py compares them).
BATCH_SIZE, VAL_FRACTION, TEST_FRACTION, SPLIT_SEED, SEED = 64, 0.15, 0.15, 0, 42
LR, WEIGHT_DECAY, WIDTH, DROPOUT, EPOCHS = 0.003, 0.01, 32, 0.2, 20


class Images(Dataset):
    """(image, label) pairs from `root/<class>/<file>.png`, each file read when asked for."""

    def __init__(self, root: Path) -> None:
        classes = sorted(d.name for d in root.iterdir() if d.is_dir())
        self.items = [
            (f, label) for label, name in enumerate(classes) for f in sorted((root / name).iterdir())
        ]
        self.labels = [label for _, label in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.items[index]
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L"), dtype=np.float32) / 255.0
        return torch.from_numpy(pixels).unsqueeze(0), label


def accuracy(net: torch.nn.Module, loader: DataLoader) -> float:
    net.eval()
    with torch.no_grad():
        correct = sum(int((net(x).argmax(-1) == y).sum()) for x, y in loader)
    return correct / len(loader.dataset)


def main(project: Path, epochs: int) -> None:
    torch.manual_seed(SEED)
    data = Images(project / "data" / "digits")
    everything = range(len(data))
    rest, test = train_test_split(
        everything, test_size=TEST_FRACTION, stratify=data.labels, random_state=SPLIT_SEED
    )
    train, val = train_test_split(
        rest,
        test_size=VAL_FRACTION / (1 - TEST_FRACTION),
        stratify=[data.labels[i] for i in rest],
        random_state=SPLIT_SEED,
    )
    shuffled = torch.Generator().manual_seed(SEED)
    train_loader = DataLoader(Subset(data, train), BATCH_SIZE, shuffle=True, generator=shuffled)
    val_loader, test_loader = (DataLoader(Subset(data, split), BATCH_SIZE) for split in (val, test))

    sys.path.insert(0, str(project / "src"))
    package = next((project / "src").glob("*/models/nets/cnn.py")).parents[2].name
    cnn = importlib.import_module(f"{package}.models.nets.cnn")
    net = cnn.SmallCNN(input_shape=(1, 8, 8), num_classes=10, width=WIDTH, dropout=DROPOUT)
    optimizer = torch.optim.AdamW(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)

    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        net.train()
        for x, y in train_loader:
            loss = F.cross_entropy(net(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        scheduler.step()
        val_acc = accuracy(net, val_loader)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        print(f"epoch {epoch} {seconds:.4f} s {cpu:.4f} cpu_s {len(train)} samples val_acc {val_acc:.4f}")
    print(f"test_acc {accuracy(net, test_loader):.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path, help="a baked project, whose data/digits exists")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    main(args.project.resolve(), args.epochs)
