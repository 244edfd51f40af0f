"""CLI: ``python -m devstack up|down|status|env|jars|spark-home|restart|spark`` (PYTHONPATH=scripts)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from . import airflow, jars, optional, report, spark_lines, stack, toxiproxy
from .errors import StackError


def _print_status(st: dict[str, Any], show_password: bool = False) -> None:  # noqa: C901 - one branch per service, flat
    """``show_password``: only for `status`, asked for by the user (never in `up`'s output, which lands in logs)."""
    print(f"state dir: {st['state_dir']}")
    homes = st.get("spark_homes") or {}
    if homes:
        print("spark homes (`scripts/stack spark-home VERSION` installs one):")
        for version, home in homes.items():
            print(f"  {version:<10} {home}")
    if not st["services"]:
        print("stack is down")
        return
    for name, svc in st["services"].items():
        where = svc.get("address") or svc.get("webui", "")
        health = "DEAD" if not svc["alive"] else "alive" if svc.get("answers", True) else "NOT ANSWERING"
        print(f"  {name:<22} pid {svc['pid']!s:<8} {health:<6} {where}")
    c = st.get("connect")
    if c:
        print("connect:")
        print(f"  bootstrap.servers  {c['bootstrap_servers']}")
        if c.get("sasl_bootstrap_servers"):
            print(
                f"  SASL_PLAINTEXT     {c['sasl_bootstrap_servers']}  (sasl.mechanism {c['sasl_mechanism']}, "
                f"user {c['sasl_username']}, password in {c['sasl_password_file']})"
            )
        else:
            print("  SASL_PLAINTEXT     not configured on this broker: `scripts/stack up` adds it")
        if c.get("sasl_ssl_bootstrap_servers"):
            print(
                f"  SASL_SSL           {c['sasl_ssl_bootstrap_servers']}  (sasl.mechanism {c['sasl_ssl_mechanism']}, "
                f"user {c['sasl_ssl_username']}, password in {c['sasl_ssl_password_file']}; "
                f"CA certificate {c['ssl_ca_file']})"
            )
            print(
                f"  SASL_SSL connection {c['kafka_sasl_ssl_connection_id']} (conn_type kafka; with its password in "
                f"`scripts/stack env`): {json.dumps(c['kafka_sasl_ssl_connection'])}"
            )
        else:
            print("  SASL_SSL           not configured on this broker: `scripts/stack up` adds it")
        print(f"  postgres DSN       {c['pg_dsn']}  (password in {c['pg_password_file']})")
        if c["spark_master_url"]:
            print(f"  spark master       {c['spark_master_url']}")
        if c.get("spark_connect_url"):
            print(
                f"  spark connect      {c['spark_connect_url']}  (connection spark_connect_default, type "
                f"spark_connect; token in {c['spark_connect_token_file']})"
            )
        for svc in st["services"].values():
            if svc.get("spark_version"):
                print(
                    f"  spark connect      {svc['address']}  Spark {svc['spark_version']} (connection "
                    f"{svc['conn_id']}, type spark_connect; token in {svc['token_file']})"
                )
        if c.get("s3_endpoint"):
            print(
                f"  S3 endpoint        {c['s3_endpoint']}  (bucket {c['s3_bucket']}, region {c['s3_region']}, "
                f"path-style; key and secret in {c['s3_credentials_file']})"
            )
            print(f"  S3 connection      {c['s3_connection_id']} (conn_type aws; in `scripts/stack env`)")
            print(f"  s3a jars           {len(c['s3a_jars'])} jars in {Path(c['s3a_jars'][0]).parent}")
        else:
            print("  S3 endpoint        not configured on this stack: `scripts/stack up` adds it")
        if c.get("schema_registry_url"):
            print(
                f"  schema registry    {c['schema_registry_url']}  (Confluent-compatible API of "
                f"{st['services']['schema_registry']['version']}; basic auth, user {c['schema_registry_user']}, "
                f"password in {c['schema_registry_password_file']})"
            )
            print(
                f"  registry connection {c['schema_registry_connection_id']} (conn_type kafka_offsets_schema_registry; "
                "in `scripts/stack env`)"
            )
        else:
            print("  schema registry    not configured on this stack: `scripts/stack up` adds it")
        if c.get("iceberg_rest_uri"):
            print(
                f"  iceberg REST       {c['iceberg_rest_uri']}  (Apache Iceberg's REST catalog; OAuth2 client "
                f"{c['iceberg_rest_client_id']}, secret in {c['iceberg_rest_client_secret_file']}; "
                f"warehouse {c['iceberg_rest_warehouse']})"
            )
            print(
                f"  catalog connection {c['iceberg_rest_connection_id']} (conn_type kafka_offsets_iceberg_rest; "
                "in `scripts/stack env`)"
            )
        print(f"  connector jars     {','.join(c['connector_jars'])}")
        print(f"  kafka tools        java -cp '{c['kafka_libs_dir']}/*' org.apache.kafka.tools.ConsumerPerformance ...")
        print(f'  airflow env        eval "$(scripts/stack env)"  -> {" ".join(c["airflow_env_vars"])}')
    af = st.get("airflow")
    if af:
        password = airflow.password(af) if show_password else "(shown by `scripts/stack status`)"
        print("airflow:")
        print(f"  UI                 {af['url']}/  (Kafka pipelines page: {af['url']}/kafka-pipelines/)")
        print(f"  admin user         {af['user']}  password {password}  (file {af['password_file']})")
        print(f"  ledger schema      {af['ledger_schema']}")


def main(argv: list[str] | None = None) -> int:  # noqa: C901 - one branch per subcommand
    p = argparse.ArgumentParser(prog="stack", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start (or reuse) PostgreSQL + Kafka + S3 + schema registry [+ Spark cluster]")
    up.add_argument("--spark-cluster", action="store_true", help="also start a Spark standalone master + worker")
    up.add_argument(
        "--spark-connect",
        action="store_true",
        help="also start a Spark Connect server (exported as the spark_connect connection spark_connect_default)",
    )
    up.add_argument(
        "--spark-version",
        help="with --spark-connect: a server of this Spark line or release (e.g. 4.1 or 4.1.2) instead of the "
        f"default one; lines: {', '.join(f'{k} ({v})' for k, v in spark_lines.SPARK_LINES.items())}",
    )
    up.add_argument(
        "--cdc",
        action="store_true",
        help="also start the CDC source: Kafka Connect with Debezium's PostgreSQL connector on the stack's "
        "PostgreSQL (database cdc_source, topics cdc.<schema>.<table>)",
    )
    up.add_argument(
        "--airflow",
        action="store_true",
        help="also start Airflow (api-server, scheduler, dag-processor, triggerer) on the project's dags/",
    )
    down = sub.add_parser("down", help="stop everything `up` started; delete the state dir")
    down.add_argument("--keep", action="store_true", help="keep the data for the next `up`")
    stat = sub.add_parser("status", help="what runs where and how to connect")
    stat.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print `export` lines (Airflow connections, kafka_sasl_ssl too) for a shell")
    jp = sub.add_parser(
        "jars",
        help="fetch the Kafka, Spark connector and S3A jars and the schema registry (and build toxiproxy where Go "
        "is installed), print their paths",
    )
    jp.add_argument(
        "--spark-version",
        help="that Spark line's or release's connector and S3A jars, installing its Spark home if needed "
        "(default: the installed pyspark's)",
    )
    sh = sub.add_parser("spark-home", help="install (if needed) the Spark home of a Spark line; print its path")
    sh.add_argument("version", help=f"a release or a line: {', '.join(spark_lines.SPARK_LINES)}")
    rs = sub.add_parser("restart", help="restart one service on the same ports and data")
    rs.add_argument("service", choices=["kafka", "postgres", "s3", "schema-registry", "iceberg-rest"])
    rs.add_argument(
        "--hard", action="store_true", help="crash it: SIGKILL kafka, s3 or schema-registry / pg_ctl stop -m immediate"
    )
    sp = sub.add_parser("spark", help="start or stop only the Spark standalone cluster")
    sp.add_argument("action", choices=["start", "stop"])
    tp = sub.add_parser(
        "toxiproxy", help="start (building it with Go once) or stop toxiproxy in front of the running services"
    )
    tp.add_argument("action", choices=["start", "stop"])
    args = p.parse_args(argv)

    try:
        if args.cmd == "up":
            stack.up(
                spark_cluster=args.spark_cluster,
                spark_connect_server=args.spark_connect,
                spark_version=args.spark_version,
                cdc_source=args.cdc,
            )
            if args.airflow:
                optional.start_airflow()
            _print_status(report.status())
        elif args.cmd == "down":
            stack.down(keep_data=args.keep)
        elif args.cmd == "status":
            st = report.status()
            print(json.dumps(st, indent=2)) if args.json else _print_status(st, show_password=True)
            return 0 if st["up"] else 3
        elif args.cmd == "env":
            for key, value in stack.current().airflow_env(kafka_sasl_ssl=True).items():
                print(f"export {key}={shlex.quote(value)}")
        elif args.cmd == "jars":
            version = spark_lines.resolve(args.spark_version)  # default: the installed pyspark's
            home = spark_lines.spark_home(version)
            libs, connector = jars.fetch_all(version)
            print(f"spark home:     {home}")
            print(f"kafka libs:     {libs}  ({len(list(libs.glob('*.jar')))} jars)")
            print("connector jars: " + ",".join(str(j) for j in connector))
            try:
                print("s3a jars:       " + ",".join(str(j) for j in jars.fetch_s3a(spark_home=home)))
            except StackError as exc:
                if spark_lines.is_worker_version(version):
                    raise
                print(f"s3a jars:       none ({exc})")
            print(f"schema registry: {jars.fetch_apicurio()}/quarkus-run.jar")
            print(f"iceberg REST:    {jars.fetch_iceberg_rest()}")
            print(f"toxiproxy:       {toxiproxy.fetch_if_go()}")
        elif args.cmd == "spark-home":
            print(spark_lines.spark_home(args.version))
        elif args.cmd == "restart":
            if args.service == "kafka":
                stack.restart_kafka(hard=args.hard)
            elif args.service == "s3":
                stack.restart_s3(hard=args.hard)
            elif args.service == "schema-registry":
                stack.restart_schema_registry(hard=args.hard)
            elif args.service == "iceberg-rest":
                stack.restart_iceberg_rest(hard=args.hard)
            else:
                stack.restart_postgres(mode="immediate" if args.hard else "fast")
            _print_status(report.status())
        elif args.cmd == "spark":
            if args.action == "start":
                print(optional.start_spark_cluster())
            else:
                optional.stop_spark_cluster()
        elif args.cmd == "toxiproxy":
            if args.action == "start":
                print(f"toxiproxy API {optional.start_toxiproxy().api_url}")
                for name, proxy in report.status()["services"]["toxiproxy"]["proxies"].items():
                    print(f"  {name:<16} {proxy}")
            else:
                optional.stop_toxiproxy()
    except StackError as exc:
        print(f"devstack: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
