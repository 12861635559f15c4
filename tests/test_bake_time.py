"""`make bench`: the bake-time script times real bakes and prints its table."""

import re
import sys
from pathlib import Path

from conftest import TEMPLATE, run


def test_bake_time_prints_the_wall_time_of_each_command(tmp_path: Path) -> None:
    result = run(sys.executable, TEMPLATE / "scripts" / "bake_time.py", "--repeats", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = re.findall(r"^\| `(cookiecutter [^`]+)` \| (\d+\.\d\d) \| (\d+\.\d\d) \|$", result.stdout, re.M)
    assert [row[0].split(" (")[0] for row in rows] == ["cookiecutter --no-input", "cookiecutter --version"]
    # One run each: the median is that run.
    assert all(float(median) == float(fastest) > 0 for _, median, fastest in rows)
    assert list(tmp_path.iterdir()) == []  # the bakes went to temporary folders, now gone
