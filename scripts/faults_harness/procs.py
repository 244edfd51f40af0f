"""Worker processes: start one in its own process group, watch what it runs, kill or pause it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.procs import cmdline
from faults_harness.worker import ERROR_PREFIX, RESULT_PREFIX

SCRIPTS = Path(__file__).resolve().parents[1]
SPARK_SUBMIT_MARKER = "org.apache.spark.deploy.SparkSubmit"
SPARK_APP_MARKER = "kafka_range_batch.py"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a live process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st and st[1] == pgid and st[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_runs(pgid: int, marker: str, program: str | None = None) -> bool:
    """A live member of the group has ``marker`` in its command line (and runs ``program``)."""
    for pid in group_members(pgid):
        line = cmdline(pid)
        if marker in line and (program is None or Path(line.split(" ", 1)[0]).name.startswith(program)):
            return True
    return False


def kill_group(pgid: int, timeout: float = 30.0) -> None:
    """SIGKILL a whole process group (a dying container) and wait until nothing of it is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


STARTED: list[int] = []  # process groups of every worker started here (each worker leads its own)
OURS = ("faults_harness.worker", SPARK_SUBMIT_MARKER, SPARK_APP_MARKER, "spark-submit")


def kill_leftovers(pgid: int, timeout: float = 10.0) -> None:
    """SIGKILL what is left of a worker's process group (an orphaned Spark job), checking each
    process's command line, since the group's leader is gone and its number could be reused."""
    for pid in group_members(pgid):
        if any(marker in cmdline(pid) for marker in OURS):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def kill_everything_started() -> None:
    """After a failed trial or on interrupt: no worker, Spark job or orphan of this harness lives on."""
    for pgid in STARTED:
        kill_leftovers(pgid)


@dataclass
class Worker:
    """One step run as its own process (an Airflow task); its output goes to ``log``."""

    step: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    returncode: int | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    killed: bool = False
    batch_id: int | None = None
    existing_attempts: frozenset[str] = frozenset()  # staging URIs of the batch before this worker ran

    def start(self) -> Worker:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.log, "w", encoding="utf-8")
        handle.write(f"$ {' '.join(self.argv)}\n")
        handle.flush()
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        handle.close()
        STARTED.append(self.proc.pid)
        self.started = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def poll(self) -> int | None:
        """Its exit status once it ended (None while it runs, or before it started)."""
        return None if self.proc is None else self.proc.poll()

    def state(self) -> str | None:
        st = _stat(self.pid)
        return st[0] if st else None

    def stopped(self) -> bool:
        return self.alive() and self.state() == "T"

    def spark_submit_running(self) -> bool:
        return self.alive() and group_runs(self.pid, SPARK_SUBMIT_MARKER)

    def spark_app_running(self) -> bool:
        """The PySpark driver (python .../kafka_range_batch.py) runs: the JVM is up, the app started."""
        return self.alive() and group_runs(self.pid, SPARK_APP_MARKER, program="python")

    def kill_group(self) -> None:
        """The worker and everything it started (spark-submit, the JVM, the Python driver)."""
        self.killed = True
        kill_group(self.pid)
        self.wait()

    def kill_worker_only(self) -> None:
        """Only the worker: its Spark job keeps running as an orphan (in the same process group)."""
        self.killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait()

    def resume(self) -> None:
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None
        self.returncode = self.proc.wait(timeout=timeout)
        self._parse()
        return self.returncode

    def _parse(self) -> None:
        text = self.output()
        for line in reversed(text.splitlines()):
            if line.startswith(RESULT_PREFIX) and self.returncode == 0:
                self.result = json.loads(line[len(RESULT_PREFIX) :])
                return
            if line.startswith(ERROR_PREFIX):
                self.error = line[len(ERROR_PREFIX) :]
                return
        if self.returncode == -signal.SIGKILL:
            self.error = "killed by SIGKILL"
        elif self.returncode:
            self.error = f"exited {self.returncode} without a result"

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def answer(self) -> dict[str, Any]:
        """The result of a worker that ended ``ok`` (an error if it printed none)."""
        if self.result is None:
            raise RuntimeError(f"{self.step} worker exited {self.returncode} without a result; see {self.log}")
        return self.result

    def output(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])


def worker_argv(
    step: str,
    pipeline: str,
    topic: str,
    output_root: str,
    schema: str,
    *,
    batch_id: int | None = None,
    run_id: str = "manual",
    try_number: int = 1,
    max_records: int | None = None,
    sink: dict[str, str] | None = None,
    value_format: dict[str, str] | None = None,
    keep_raw_value: bool = True,
    json_schema: str | None = None,
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "faults_harness.worker",
        step,
        "--pipeline",
        pipeline,
        "--topic",
        topic,
        "--output-root",
        output_root,
        "--ledger-schema",
        schema,
        "--run-id",
        run_id,
        "--try-number",
        str(try_number),
    ]
    if batch_id is not None:
        argv += ["--batch-id", str(batch_id)]
    if max_records is not None:
        argv += ["--max-records", str(max_records)]
    if sink is not None:
        argv += ["--sink", json.dumps(sink)]
    if value_format is not None:
        argv += ["--value-format", json.dumps(value_format)]
    if not keep_raw_value:
        argv += ["--keep-raw-value", "false"]
    if json_schema is not None:
        argv += ["--json-schema", json_schema]
    return argv


def worker_env(airflow_env: dict[str, str], airflow_home: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a task: Airflow connections for the stack, spark-submit on PATH."""
    env = dict(os.environ)
    for name in ("AIRFLOW_KAFKA_OFFSETS_CRASH_AT", "FAULTS_PAUSE_AT"):
        env.pop(name, None)
    env.update(airflow_env)
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        {
            "AIRFLOW_HOME": airflow_home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": f"{SCRIPTS}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(SCRIPTS),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env
