"""Predict from a checkout: `python predict.py ckpt_path=PATH input=FILE_OR_FOLDER`."""

from {{ cookiecutter.package_name }}.predict import main

if __name__ == "__main__":
    main()
