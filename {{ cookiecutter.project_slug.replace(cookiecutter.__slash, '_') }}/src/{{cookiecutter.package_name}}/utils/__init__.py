"""Small helpers for the entry points, one concern per module."""
