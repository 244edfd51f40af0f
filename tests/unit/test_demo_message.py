"""``scripts/demo`` ends by saying what it left running and how to stop it (devstack.report.left_running)."""

from __future__ import annotations

import ast
from pathlib import Path

from devstack import report

REPO = Path(__file__).resolve().parents[2]


def status(**services: dict) -> dict:
    """A status in the shape of :func:`devstack.report.status`."""
    return {"state_dir": "/tmp/ako-stack-0", "up": bool(services), "services": services, "spark_homes": {}}


def test_the_message_names_every_service_where_it_runs_and_how_to_stop_it() -> None:
    st = status(
        postgres={"pid": 11, "alive": True, "address": "127.0.0.1:40001"},
        kafka={"pid": 12, "alive": True, "address": "127.0.0.1:40002", "sasl_ssl_address": "127.0.0.1:40004"},
        schema_registry={"pid": 13, "alive": True, "address": "http://127.0.0.1:40005/apis/ccompat/v7"},
        spark_master={"pid": 14, "alive": False, "address": "spark://127.0.0.1:7077", "webui": "http://x"},
    )
    lines = report.left_running(st).splitlines()
    assert lines[0] == "left running: the local stack (state dir /tmp/ako-stack-0):"
    assert lines[1:5] == [
        "  postgres               127.0.0.1:40001",
        "  kafka                  127.0.0.1:40002",
        "  schema_registry        http://127.0.0.1:40005/apis/ccompat/v7",
        "  spark_master           spark://127.0.0.1:7077  (not running)",
    ]
    assert "`scripts/stack status`" in lines[5]
    assert lines[6].startswith("stop it (and delete its data): `scripts/stack down`")
    assert report.left_running(status()) == "the local stack is down: nothing is left running"


def test_the_demo_prints_it_last_from_the_stacks_status() -> None:
    tree = ast.parse((REPO / "scripts" / "demo_ingest.py").read_text(encoding="utf-8"))
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    *_, last_print, _return = main.body
    assert isinstance(_return, ast.Return)
    assert "report.left_running(report.status())" in ast.unparse(last_print)
    assert (REPO / "scripts" / "demo").read_text().rstrip().endswith('scripts/demo_ingest.py" "$@"')
