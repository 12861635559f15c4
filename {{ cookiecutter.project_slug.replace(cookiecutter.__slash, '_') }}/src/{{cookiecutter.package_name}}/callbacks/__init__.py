"""Callbacks that keep a run safe to stop and to continue."""
