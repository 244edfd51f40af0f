"""TLS material for the broker's SASL_SSL listener, made once per stack with Debian's ``openssl``.

A CA (EC P-256, self-signed) and a broker certificate it signs for ``127.0.0.1`` and ``localhost``
(subject alternative names, so clients verify the host name as they do by default), packed with the
broker's key into a PKCS12 key store. Everything lives in ``<state>/kafka-tls`` (0700, files 0600).
The key store's password is generated into a 0600 file that openssl reads (``-passout file:``), so
it is never on a command line. The CA's and the broker's private keys exist only while the key store
is made: afterwards nothing can sign another certificate for this CA, and only the key store (and
its password file) holds the broker's key. Clients need ``ca.pem`` alone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
from pathlib import Path

from . import procs

TLS_DIR = "kafka-tls"
CA_FILE = "ca.pem"
KEYSTORE_FILE = "broker.p12"
KEYSTORE_PASSWORD_FILE = "broker-keystore-password"
DAYS = "3650"
SUBJECT_ALT_NAMES = "IP:127.0.0.1,DNS:localhost"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-noenc"]


def write_secret(path: Path, value: str | None = None) -> str:
    """Create ``path`` (0600, never overwritten) holding a new random secret; return its content."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write((value or secrets.token_urlsafe(24)) + "\n")
    return path.read_text().strip()


def paths(sd: Path) -> dict[str, str]:
    """Where the stack's TLS files are (whether or not they exist yet)."""
    base = sd / TLS_DIR
    return {
        "ssl_dir": str(base),
        "ssl_ca_file": str(base / CA_FILE),
        "ssl_keystore_file": str(base / KEYSTORE_FILE),
        "ssl_keystore_password_file": str(base / KEYSTORE_PASSWORD_FILE),
    }


def ensure(sd: Path) -> dict[str, str]:
    """Make the CA and the broker's key store unless they exist; return :func:`paths`."""
    files = paths(sd)
    if all(Path(files[k]).is_file() for k in ("ssl_ca_file", "ssl_keystore_file", "ssl_keystore_password_file")):
        return files
    base = Path(files["ssl_dir"])
    if base.exists():  # a set left half-made: start over
        shutil.rmtree(base)
    base.mkdir(mode=0o700, parents=True)
    os.chmod(base, 0o700)
    openssl = procs.require_tool("openssl", "apt-get install openssl")
    ca_key, broker_key, broker_cert = base / "ca.key", base / "broker.key", base / "broker.pem"
    write_secret(Path(files["ssl_keystore_password_file"]))
    try:
        procs.run(
            [
                openssl,
                "req",
                "-x509",
                *_EC,
                "-keyout",
                str(ca_key),
                "-out",
                files["ssl_ca_file"],
                "-days",
                DAYS,
                "-subj",
                "/CN=airflow-kafka-offsets local stack CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            "openssl (stack CA)",
            cwd=base,
        )
        procs.run(
            [
                openssl,
                "req",
                "-x509",
                "-CA",
                files["ssl_ca_file"],
                "-CAkey",
                str(ca_key),
                *_EC,
                "-keyout",
                str(broker_key),
                "-out",
                str(broker_cert),
                "-days",
                DAYS,
                "-subj",
                "/CN=localhost",
                "-addext",
                f"subjectAltName={SUBJECT_ALT_NAMES}",
                "-addext",
                "basicConstraints=critical,CA:FALSE",
                "-addext",
                "keyUsage=critical,digitalSignature",
                "-addext",
                "extendedKeyUsage=serverAuth",
            ],
            "openssl (broker certificate)",
            cwd=base,
        )
        keystore_tmp = base / (KEYSTORE_FILE + ".tmp")
        procs.run(
            [
                openssl,
                "pkcs12",
                "-export",
                "-in",
                str(broker_cert),
                "-inkey",
                str(broker_key),
                "-certfile",
                files["ssl_ca_file"],
                "-name",
                "broker",
                "-out",
                str(keystore_tmp),
                "-passout",
                f"file:{files['ssl_keystore_password_file']}",
            ],
            "openssl (broker key store)",
            cwd=base,
        )
        for name in (CA_FILE, keystore_tmp.name):
            os.chmod(base / name, 0o600)
        keystore_tmp.replace(files["ssl_keystore_file"])  # last: its presence means the set is complete
    finally:
        for key in (ca_key, broker_key, broker_cert):
            key.unlink(missing_ok=True)
    return files


def handshake(host: str, port: int, ca_file: str, timeout: float = 3.0) -> bool:
    """True if a TLS handshake with ``host:port`` succeeds and its certificate chains to ``ca_file``
    for that host name."""
    context = ssl.create_default_context(cafile=ca_file)
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False
