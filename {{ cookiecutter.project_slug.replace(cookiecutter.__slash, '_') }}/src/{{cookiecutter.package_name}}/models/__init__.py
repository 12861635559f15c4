"""LightningModules: loss, metrics and optimization. Architectures live in `nets/`."""
