"""The error users see for bad input: one paragraph, no traceback."""

from hydra.errors import CompactHydraException


class ConfigError(CompactHydraException):
    """A configuration value is wrong. The message names the value and what is accepted.

    Hydra prints only the message of a CompactHydraException (set HYDRA_FULL_ERROR=1 for
    the traceback) and exits with status 1.
    """


class TrainingError(CompactHydraException):
    """Training cannot go on (e.g. a non-finite loss). The message says where it stopped and what was kept."""
