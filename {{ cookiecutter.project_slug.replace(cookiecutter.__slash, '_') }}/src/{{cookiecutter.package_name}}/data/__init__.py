"""LightningDataModules: each owns loading, splitting and batching of one dataset."""
