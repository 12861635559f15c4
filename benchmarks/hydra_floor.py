"""The least a Hydra app's `--help` costs: an app with no config of its own. `run.py` times its
`--help` beside the project's, on the same machine, so the start-up figure has its floor beside it."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path=None)
def main(cfg: DictConfig) -> None:
    print(cfg)


if __name__ == "__main__":
    main()
