"""A multilayer perceptron over flattened inputs: images, or the rows of a table."""

import math
from collections.abc import Sequence

from torch import Tensor, nn


class MLP(nn.Module):
    """Flatten, normalize (in training by the batch's mean and variance; evaluated, by their average over all
    training batches, saved: columns of any scale train like pixels), Linear-ReLU-Dropout layers, a head."""

    def __init__(
        self, input_shape: Sequence[int], num_classes: int, hidden: Sequence = (128, 64), dropout: float = 0.1
    ) -> None:
        super().__init__()
        width = math.prod(input_shape)
        layers: list[nn.Module] = [nn.Flatten(), nn.BatchNorm1d(width, affine=False, momentum=None)]
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))
