"""A real single-node SLURM cluster for the tests: munged, slurmctld and slurmd, started as root.

Everything it has is its own: a temporary directory (config, MUNGE key and socket, state,
spool, logs), two free ports and a cluster name, so clusters of several test runs on one host
do not meet. SLURM's commands find it through SLURM_CONF (`Cluster.env`). Accounting is off:
jobs are followed with `scontrol show job`, which keeps finished jobs for an hour here.
It installs nothing: Debian and Ubuntu have `apt-get install slurm-wlm munge`.
"""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
# States a job does not leave by itself (a requeue puts it back to PENDING).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
# Seconds a requeued job waits before it may start again (SLURM's default 120; at least 5).
REQUEUE_HOLD_S = 5


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def unavailable() -> str | None:
    """Why a cluster cannot start here, or None."""
    missing = [name for name in DAEMONS + COMMANDS if _which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian, Ubuntu: apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "needs root: it starts SLURM's daemons (munged, slurmctld, slurmd) as root"
    return None


def _memory_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 4096


class Cluster:
    """One controller and one node (this host), in `root`; `start()` it, `stop()` it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self._daemons: list[subprocess.Popen] = []

    def _write_config(self) -> None:
        for name in ("state", "spool", "log"):
            (self.root / name).mkdir()
        key_dir = self.root / "munge"
        key_dir.mkdir(mode=0o700)
        key = key_dir / "key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        # munged wants its socket's directory and every parent open to all (execute permission).
        self.root.chmod(0o755)
        self.socket = self.root / "munge.socket"
        port = free_port()
        self.conf.write_text(
            "\n".join(
                [
                    f"ClusterName=test{port}",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    f"SlurmctldPort={port}",
                    f"SlurmdPort={free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    # cred_expire is also how long a requeued job is held before it may start again.
                    f"AuthInfo=socket={self.socket},cred_expire={REQUEUE_HOLD_S}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "MpiDefault=none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    # The scheduler looks at pending jobs every 2 s (a held job starts soon after its hold).
                    "SchedulerType=sched/builtin",
                    "SchedulerParameters=sched_interval=2",
                    "ReturnToService=2",
                    "MinJobAge=3600",
                    "KillWait=10",
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={self.root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
                    # The node as configured (at least 2 CPUs, for two tasks), whatever the host has.
                    "SlurmdParameters=config_overrides",
                    f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={max(2, os.cpu_count() or 1)} "
                    f"RealMemory={_memory_mib() // 2} State=UNKNOWN",
                    f"PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _spawn(self, *command: str) -> None:
        name = Path(command[0]).name
        with (self.root / "log" / f"{name}.out").open("w") as out:
            self._daemons.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))

    def start(self, timeout: float = 60) -> None:
        self._write_config()
        munge, log = self.root / "munge", self.root / "log"
        files = {"key": munge / "key", "seed": munge / "seed", "log": log / "munged", "pid": munge / "pid"}
        options = [f"--{name}-file={path}" for name, path in files.items()]
        self._spawn(_which("munged"), "--foreground", f"--socket={self.socket}", *options)
        self._spawn(_which("slurmctld"), "-D", "-f", str(self.conf))
        self._spawn(_which("slurmd"), "-D", "-f", str(self.conf))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.command("sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle":
                return
            if any(daemon.poll() is not None for daemon in self._daemons):
                break
            time.sleep(0.5)
        logs = "\n".join(f"--- {p.name}:\n{p.read_text()[-2000:]}" for p in sorted(log.iterdir()))
        self.stop()
        raise RuntimeError(f"the test SLURM cluster did not start within {timeout} s:\n{logs}")

    def stop(self) -> None:
        """Cancel what still runs, then end the daemons this cluster started, by their pids."""
        if self._daemons and self._daemons[0].poll() is None:
            jobs = self.command("squeue", "-h", "-o", "%A", check=False).stdout.split()
            if jobs:
                self.command("scancel", *jobs, check=False)
                deadline = time.monotonic() + 30
                while self.command("squeue", "-h", check=False).stdout.strip():
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
        for daemon in reversed(self._daemons):
            daemon.terminate()
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        self._daemons = []

    def command(
        self, *args: str, check: bool = True, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a SLURM command (sbatch, scontrol, ...) on this cluster, in `env` (else this process's)."""
        env = {**(os.environ if env is None else env), **self.env}
        result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result

    def job(self, job_id: str) -> dict[str, str]:
        """The job's record as `scontrol show job` gives it: JobState, ExitCode, Restarts, ..."""
        text = self.command("scontrol", "show", "job", "--oneliner", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def wait(self, job_id: str, restarts: int = 0, timeout: float = 300) -> dict[str, str]:
        """Wait until the job has ended after at least `restarts` requeues; return its record.

        A job that ends with fewer requeues is returned too, once it has stayed ended for longer
        than a requeue takes to show.
        """
        deadline = time.monotonic() + timeout
        ended_since = None
        while time.monotonic() < deadline:
            record = self.job(job_id)
            if record.get("JobState") in ENDED:
                if int(record.get("Restarts", "0")) >= restarts:
                    return record
                ended_since = ended_since or time.monotonic()
                if time.monotonic() - ended_since > 15:
                    return record
            else:
                ended_since = None
            time.sleep(0.5)
        raise TimeoutError(f"SLURM job {job_id} did not end within {timeout} s: {self.job(job_id)}")


@contextmanager
def started_cluster() -> Iterator[Cluster]:
    """A started cluster in a new temporary directory (not pytest's: munged needs every parent
    of its socket open to all), stopped and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="slurm-test-"))
    cluster = Cluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
