"""Evaluate a checkpoint from a checkout: `python eval.py ckpt_path=PATH [overrides]`."""

from {{ cookiecutter.package_name }}.eval import main

if __name__ == "__main__":
    main()
