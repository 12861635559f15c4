"""A small convolutional net for images of any size."""

from collections.abc import Sequence

from torch import Tensor, nn


def block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())


class SmallCNN(nn.Module):
    """Conv blocks (`backbone`: fine-tuning freezes it), a linear `head`: (N, C, H, W) in, logits out."""

    def __init__(
        self, input_shape: Sequence[int], num_classes: int, width: int = 32, dropout: float = 0.2
    ) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"model/net=cnn takes images (C, H, W), not {input_shape}: use model/net=mlp")
        convs = [block(input_shape[0], width), block(width, width), nn.MaxPool2d(2, ceil_mode=True)]
        self.backbone = nn.Sequential(*convs, block(width, 2 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(2 * width, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))
