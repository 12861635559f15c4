"""How long `cookiecutter --no-input` of this template takes: `make bench`.

Prints the median and the fastest wall time of baking the default project with the
cookiecutter command line, and of `cookiecutter --version` (the command's own start-up) for
scale. A measurement, not a test: on a shared machine, read the spread.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
COOKIECUTTER = str(Path(sys.executable).parent / "cookiecutter")


def wall_times(arguments: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            result = subprocess.run(
                [COOKIECUTTER, *arguments, "--output-dir", out], capture_output=True, text=True
            )
            times.append(time.perf_counter() - start)
            if result.returncode != 0:
                raise RuntimeError(f"cookiecutter {' '.join(arguments)} failed:\n{result.stderr[-2000:]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7, help="runs of each command")
    args = parser.parse_args()
    commands = {
        "cookiecutter --no-input (the default project)": ["--no-input", str(TEMPLATE)],
        "cookiecutter --version (its start-up, for scale)": ["--version"],
    }
    print("| command | median s | fastest s |\n|---|---|---|")
    for name, arguments in commands.items():
        times = wall_times(arguments, args.repeats)
        print(f"| `{name}` | {statistics.median(times):.2f} | {min(times):.2f} |", flush=True)


if __name__ == "__main__":
    main()
