"""The README and docs/ against the code: what users copy runs, what the pages name exists.

- every ```python block compiles and its imports resolve; a block with a DAG builds it in a DagBag;
- shell blocks name only scripts that exist, CLI commands parse with the CLI's own parser, the
  extras of `pip install` exist, `python -m` modules exist; repository paths in code spans exist;
- the README's links, its layout (one line per package, checked against the tree) and the
  generated blocks' markers (scripts/spark-matrix, scripts/bench --update-readme);
- tables of options against their sources: the `[kafka_offsets]` options against the provider
  info, `plan_kwargs` / `spark_kwargs` against the task group's typed options.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import mkdocs_hooks
import option_tables
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(lang: str) -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m["lang"] == lang:
                found.append(Block(page, text.count("\n", 0, m.start()) + 1, lang, m["body"]))
    return found


def section(page: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    text = page.read_text()
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    following = re.compile(rf"^#{{1,{len(level)}}} ", re.M)
    end = following.search(text, start + len(heading))
    return text[start : end.start() if end else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows (header and rule skipped)."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[2:]]


def code_names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


PYTHON = blocks("python")
SHELL = blocks("bash")


def test_the_pages_have_python_and_shell_blocks_to_check() -> None:
    assert len(PYTHON) >= 8 and len(SHELL) >= 8
    assert {b.page.name for b in PYTHON} >= {"README.md", "dags.md", "sinks.md"}


# A block that uses one of these Airflow APIs is checked where Airflow has it (docs/airflow.md).
FEATURE_APIS = {"PartitionedAssetTimetable": "partitioned_assets", "VariableInterval": "deadline_variable_interval"}


def skip_where_airflow_lacks_its_features(block: Block) -> None:
    from airflow_kafka_offsets.airflow_features import BY_NAME, available

    for api, feature in FEATURE_APIS.items():
        if api in block.body and not available(feature):
            pytest.skip(f"{block} uses {api}: Airflow {BY_NAME[feature].since} or later")


@pytest.mark.parametrize("block", PYTHON, ids=str)
def test_every_python_block_compiles_and_its_imports_resolve(block: Block) -> None:
    skip_where_airflow_lacks_its_features(block)
    tree = compile(block.body, str(block), "exec", ast.PyCF_ONLY_AST)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"{block}: {node.module} has no {alias.name}"
                )


DAG_BLOCKS = [b for b in PYTHON if "with DAG(" in b.body]


def test_the_dag_examples_are_found() -> None:
    pages = {b.page.name for b in DAG_BLOCKS}
    assert {"README.md", "dags.md", "sinks.md"} <= pages and len(DAG_BLOCKS) >= 5


@pytest.mark.parametrize("block", DAG_BLOCKS, ids=str)
def test_every_dag_example_builds_its_dag(block: Block, tmp_path: Path) -> None:
    from ..dagbag import DagBag

    skip_where_airflow_lacks_its_features(block)

    dag_file = tmp_path / "example_dag.py"
    dag_file.write_text(block.body)
    bag = DagBag(dag_folder=str(dag_file))
    assert bag.import_errors == {}, f"{block}: {bag.import_errors}"
    assert len(bag.dags) == 1, block
    (dag,) = bag.dags.values()
    assert dag.task_dict, f"{block}: the DAG has no tasks"


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: comments dropped, continuation lines joined, output lines skipped."""
    text = re.sub(r"\\\n\s*", " ", block.body)
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        commands.append(re.sub(r"\s+#\s.*$", "", line))
    return commands


def test_shell_blocks_name_only_scripts_that_exist() -> None:
    named = set()
    for block in SHELL:
        for command in shell_commands(block):
            for script in re.findall(r"(?<![\w/.])scripts/[\w.-]+", command):
                named.add(script)
                path = ROOT / script
                assert path.is_file() and path.stat().st_mode & 0o111, f"{block}: {script} is not an executable script"
    assert {"scripts/demo", "scripts/test", "scripts/stack", "scripts/faults"} <= named


def cli_argv(command: str) -> list[str] | None:
    """The arguments after ``airflow kafka-offsets`` / ``airflow-kafka-offsets``, up to a pipe."""
    words = shlex.split(command.split(" | ")[0])
    for prefix in (["airflow", "kafka-offsets"], ["airflow-kafka-offsets"]):
        if words[: len(prefix)] == prefix:
            return words[len(prefix) :]
    return None


def test_cli_commands_in_shell_blocks_parse_with_the_cli() -> None:
    from airflow_kafka_offsets.cli import build_parser

    parsed = 0
    for block in SHELL:
        for command in shell_commands(block):
            argv = cli_argv(command)
            if argv is None:
                continue
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:  # --help exits 0; a bad option exits 2
                assert exc.code == 0, f"{block}: {command!r} does not parse"
            parsed += 1
    assert parsed >= 5


def test_pip_installs_name_extras_that_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    seen = set()
    for block in SHELL:
        for command in shell_commands(block):
            for spec in re.findall(r"pip install '?([\w-]+(?:\[[\w,]+\])?)", command):
                name, _, rest = spec.partition("[")
                assert name == project["name"], f"{block}: {spec}"
                seen |= set(filter(None, rest.rstrip("]").split(",")))
    for page in PAGES:  # extras named in prose: `pip install 'airflow-kafka-offsets[iceberg]'` or `[delta]`
        seen |= set(re.findall(r"airflow-kafka-offsets\[(\w+)\]", page.read_text()))
    assert seen and seen <= extras, seen - extras


def test_python_dash_m_modules_exist() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
    try:
        modules = {m for page in PAGES for m in re.findall(r"python -m ([\w.]+)", page.read_text())}
        assert modules
        for module in modules:
            assert importlib.util.find_spec(module) is not None, module
    finally:
        del sys.path[:2]


REPO_PATH = re.compile(r"`((?:scripts|dags|tests|benchmarks|spark_apps|docs|docker)/[\w./-]*)`")


def test_repository_paths_in_code_spans_exist() -> None:
    checked = 0
    for page in PAGES:
        for path in REPO_PATH.findall(page.read_text()):
            if "*" in path:
                continue
            assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} names {path}, which does not exist"
            checked += 1
    assert checked > 20


def test_the_readme_links_resolve() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert {"docs/index.md", "docs/guarantees.md", "docs/contributing.md"} <= set(local)
    for link in local:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_every_page_is_in_the_sites_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.glob("*.md"):
        assert f": {page.name}\n" in nav, f"{page.name} is not in mkdocs.yml's nav"


# -- the layout ------------------------------------------------------------------------------------


def layout_entries() -> dict[str, str]:
    """``path/`` -> description from the README's Layout block: one line per package."""
    (block,) = FENCE.finditer(section(README, "## Layout"))
    entries = {}
    for line in block["body"].splitlines():
        path, _, description = line.partition(" ")
        assert path.endswith("/") and description.strip(), f"layout line {line!r}: '<dir>/  <one line>'"
        entries[path] = description.strip()
    return entries


def test_the_layout_lists_every_package_and_nothing_that_is_missing() -> None:
    entries = layout_entries()
    packages = {
        f"{p.parent.relative_to(ROOT).as_posix()}/" for p in (ROOT / "airflow_kafka_offsets").rglob("__init__.py")
    }
    listed_packages = {p for p in entries if p.startswith("airflow_kafka_offsets/")}
    assert packages - listed_packages == set(), "packages missing from the README's layout"
    assert listed_packages - packages == set(), "listed in the README's layout but not a package"
    for path in entries:
        assert (ROOT / path).is_dir(), f"the layout lists {path}, which is not a directory"
    assert {"spark_apps/", "dags/", "docs/", "scripts/", "tests/"} <= set(entries)


# -- generated blocks ------------------------------------------------------------------------------


def test_the_readme_keeps_the_markers_its_writers_rewrite() -> None:
    import spark_matrix

    from benchmarks.report import README_END, README_START

    text = README.read_text()
    for start, end in ((spark_matrix.START, spark_matrix.END), (README_START, README_END)):
        assert text.count(start) == text.count(end) == 1 and text.index(start) < text.index(end)
    assert (spark_matrix.START, spark_matrix.END) == mkdocs_hooks.BLOCKS["spark-matrix"]
    assert (README_START, README_END) == mkdocs_hooks.BLOCKS["benchmarks-summary"]


def test_pages_include_the_readmes_generated_blocks() -> None:
    readme = "a\n<!-- spark-matrix:start -->\n| t |\n<!-- spark-matrix:end -->\nb\n"
    page = "before\n<!-- readme-block: spark-matrix -->\nafter\n"
    assert mkdocs_hooks.include_readme_blocks(page, readme) == "before\n| t |\nafter\n"
    assert "<!-- readme-block: spark-matrix -->" in (DOCS / "spark.md").read_text()
    assert "<!-- readme-block: benchmarks-summary -->" in (DOCS / "benchmarks.md").read_text()
    assert "| 4.2 (" in mkdocs_hooks.readme_block("spark-matrix")


# -- option tables against their sources -----------------------------------------------------------


def test_the_config_table_is_the_provider_infos_options() -> None:
    from airflow_kafka_offsets import get_provider_info

    options = get_provider_info()["config"]["kafka_offsets"]["options"]
    rows = table_rows(section(DOCS / "connections.md", "## The `[kafka_offsets]` options"))
    documented = {code_names(row[0])[0]: (code_names(row[1]) or [""])[0] for row in rows}
    assert documented == {name: option["default"] for name, option in options.items()}


@pytest.mark.parametrize(
    "page,heading",
    [("connections.md", "## Ledger deadlines"), ("guarantees.md", "## Timeouts: what bounds each step")],
)
def test_the_ledger_deadline_tables_are_the_codes_defaults(page: str, heading: str) -> None:
    from dataclasses import asdict

    from airflow_kafka_offsets.core.timeouts import UNITS, LedgerTimeouts

    text = section(DOCS / page, heading)
    start = text.index("\n|")
    rows = table_rows(text[start : text.index("\n\n", start)])  # the section's first table
    documented = {code_names(row[0])[0]: code_names(row[1])[0] for row in rows}
    assert documented == {key: str(value) for key, value in asdict(LedgerTimeouts()).items()}
    if page == "connections.md":
        assert {code_names(row[0])[0]: row[2] for row in rows} == UNITS


@pytest.mark.parametrize("heading", [option_tables.PLAN_HEADING, option_tables.SPARK_HEADING])
def test_the_option_tables_are_the_declared_options(heading: str) -> None:
    from airflow_kafka_offsets.operators.task_group import PLAN_KWARGS, SPARK_KWARGS

    text = option_tables.PAGE.read_text()
    assert option_tables.rewrite(text) == text, "dags.md: run python scripts/option_tables.py"
    start, end = option_tables.table_after(text, heading)
    keys = PLAN_KWARGS if heading == option_tables.PLAN_HEADING else SPARK_KWARGS
    assert [name for row in table_rows(text[start:end]) for name in code_names(row[0])] == list(keys)


def test_exceptions_named_in_the_pages_exist() -> None:
    from airflow_kafka_offsets import errors

    named = {n for page in PAGES for n in re.findall(r"`(\w+Error)`", page.read_text())}
    assert len(named) > 10
    assert {n for n in named if not hasattr(errors, n)} == {"OutOfMemoryError"}  # the JVM's, in Spark's output


def test_asset_and_alias_names_are_as_documented() -> None:
    from airflow_kafka_offsets.lineage import pipeline_output_alias
    from airflow_kafka_offsets.triggers import KafkaLagTrigger, lag_asset

    assert pipeline_output_alias("orders").name == "kafka_offsets/orders"
    asset = lag_asset(KafkaLagTrigger(pipeline="orders", topics=["orders"], max_lag_records=10))
    assert asset.name == "kafka_offsets_lag/orders"


def test_the_manual_operations_form_has_the_fields_the_page_names() -> None:
    from ..dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_offsets_manual_ops.py"))
    dag = bag.dags["kafka_offsets_manual_ops"]
    page = (DOCS / "operations.md").read_text()
    fields = set(re.findall(r"`((?:reset|replay|catch_up|abort|sweep|spec)_\w+)`", page))
    fields |= set(re.findall(r'"(\w+)": ', page.split("dagRuns", 1)[1].split("```", 1)[0])) - {"logical_date", "conf"}
    assert {"reset_topic", "reset_partitions", "replay_output_root", "replay_first_batch", "operation"} <= fields
    assert fields - set(dag.params) == set()
    assert "operation" in dag.task_dict


def test_the_readmes_install_section_names_every_user_extra() -> None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    install = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\[([a-z-]+)\]", install))
    assert named == extras - {"test", "lint"}  # the two the project's own scripts install


def test_the_iceberg_rest_connection_table_is_the_forms_fields() -> None:
    from airflow_kafka_offsets.clients.iceberg_rest import FIELDS, FORM

    rows = table_rows(section(DOCS / "connections.md", "## Iceberg REST catalog connection"))
    documented = {row[0]: row[1] for row in rows}
    standard = {FORM.relabeling[name]: name for name in ("host", "login", "password")}
    expected = standard | {field["label"]: f"extra `{key}`" for key, field in FIELDS.items()}
    assert {label: stored.removesuffix(" (masked)") for label, stored in documented.items()} == expected
    assert documented["Bearer token"] == "extra `token` (masked)" and FIELDS["token"]["schema"]["format"] == "password"


def test_the_full_runs_workers_are_the_test_commands_default() -> None:
    """The README and the contributing page say a full run uses two pytest-xdist workers, the older Airflow
    lines too: what scripts/test and scripts/airflow_matrix.py take when AKO_TEST_WORKERS is not set."""
    words = {"1": "one", "2": "two", "3": "three", "4": "four"}
    script = re.search(r'workers="\$\{AKO_TEST_WORKERS:-(\d+)\}"', (ROOT / "scripts" / "test").read_text())
    matrix = re.search(
        r'os\.environ\.get\("AKO_TEST_WORKERS", "(\d+)"\)', (ROOT / "scripts/airflow_matrix.py").read_text()
    )
    assert script and matrix and script.group(1) == matrix.group(1)
    for page in (README, DOCS / "contributing.md"):
        assert f"{words[script.group(1)]} pytest-xdist workers" in " ".join(page.read_text().split()), page
    contributing = " ".join((DOCS / "contributing.md").read_text().split())
    assert f"runs each older line's tests on {words[matrix.group(1)]} workers" in contributing
