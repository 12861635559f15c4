"""Train from a checkout: `python train.py [overrides]` (see the README)."""

from {{ cookiecutter.package_name }}.train import main

if __name__ == "__main__":
    main()
