"""A multilayer perceptron over flattened inputs."""

from collections.abc import Sequence

from torch import Tensor, nn


class MLP(nn.Module):
    """Flatten, then Linear-ReLU-Dropout per hidden layer (the backbone), then a linear head."""

    def __init__(
        self,
        in_features: int = 64,
        num_classes: int = 10,
        hidden: Sequence[int] = (128, 64),
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        for width in hidden:
            layers += [nn.Linear(in_features, width), nn.ReLU(), nn.Dropout(dropout)]
            in_features = width
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(in_features, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))
