"""Export from a checkout: `python export.py ckpt_path=PATH format=onnx|torchscript`."""

from {{ cookiecutter.package_name }}.export import main

if __name__ == "__main__":
    main()
