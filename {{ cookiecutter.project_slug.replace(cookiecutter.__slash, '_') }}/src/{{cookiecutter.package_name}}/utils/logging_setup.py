"""One console line per log record, and Lightning's records in the run's log file."""

import logging


def use_hydra_logging() -> None:
    """Drop the console handler that `import lightning` attaches to its logger.

    Hydra already sends every record to the console and to <run>/<task_name>.log through
    the root logger; with Lightning's own handler each of its messages would print twice.
    """
    if logging.getLogger().hasHandlers():
        logging.getLogger("lightning").handlers.clear()
