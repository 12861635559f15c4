"""Hydra configuration groups, shipped inside the package so installed projects find them."""
