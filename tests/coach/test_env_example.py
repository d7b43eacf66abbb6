"""`.env.example` is the one place each setting is described: every variable the app, its
commands and its deployment read is there, once, under a comment, and every variable there
is read by something."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import uvicorn.config

from tests.processes import REPO

# The packages and scripts that make up the app, its commands and its deployment. Tests
# and benchmarks set up environments of their own and are not configured by an operator.
PYTHON_SOURCES = ["coach", "memory", "accounts", "emails", "infra", "offline_coach", "paste_splitter", "manage.py"]
SHELL_SOURCES = ["bin", "docker-compose.yml", "Dockerfile"]
ENV_READERS = frozenset(
    {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_required", "env_secret", "env_fernet_keys"}
)
# Read by code but not a setting of this app: each entry point names its own settings module.
NOT_SETTINGS = frozenset({"DJANGO_SETTINGS_MODULE"})
VARIABLE = re.compile(r"^([A-Z][A-Z0-9_]*)=", re.MULTILINE)
NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# `$$` is compose's escape for a `$` the container's own shell expands, not the operator's.
SHELL_READ = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)")


def python_files() -> list[Path]:
    files: list[Path] = []
    for source in PYTHON_SOURCES:
        path = REPO / source
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [file for file in files if "migrations" not in file.parts]


def _is_environ(node: ast.expr) -> bool:
    """`os.environ`, or a mapping handed the environment under the name `env`/`environ`."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id in {"env", "environ"}
    )


def _reads_a_variable(call: ast.Call) -> bool:
    """`env_int("X", ...)` and the like, `os.environ.get("X")`, `os.getenv("X")`."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in ENV_READERS
    return isinstance(func, ast.Attribute) and (
        func.attr == "getenv" or (func.attr in {"get", "setdefault"} and _is_environ(func.value))
    )


def names_read_in_python(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, str) and _reads_a_variable(node):
                names.add(node.args[0].value)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_environ(node.value)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            names.add(node.slice.value)
    return {name for name in names if NAME.fullmatch(name)}


def names_read_in_shell(path: Path) -> set[str]:
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    return {name for file in files for name in SHELL_READ.findall(file.read_text().replace("$$", ""))}


def names_read_by_the_code() -> set[str]:
    names = {name for file in python_files() for name in names_read_in_python(file.read_text())}
    names |= {name for source in SHELL_SOURCES for name in names_read_in_shell(REPO / source)}
    # uvicorn reads its trusted proxies from the environment itself, where the flag is absent
    # (the run command, the image and compose all leave the flag out).
    if 'os.environ.get("FORWARDED_ALLOW_IPS"' in Path(uvicorn.config.__file__).read_text():
        names.add("FORWARDED_ALLOW_IPS")
    return names - NOT_SETTINGS


def documented() -> list[str]:
    return VARIABLE.findall((REPO / ".env.example").read_text())


def test_every_variable_the_code_reads_is_described_in_env_example() -> None:
    missing = names_read_by_the_code() - set(documented())

    assert not missing, f"read by the code but not in .env.example: {sorted(missing)}"


def test_every_variable_in_env_example_is_read_by_the_code() -> None:
    unread = set(documented()) - names_read_by_the_code()

    assert not unread, f"in .env.example but read by nothing: {sorted(unread)}"


def test_each_variable_is_in_env_example_once_under_a_comment() -> None:
    names = documented()
    twice = {name for name in names if names.count(name) > 1}
    undescribed = [
        name
        for block in (REPO / ".env.example").read_text().split("\n\n")
        if not any(line.startswith("#") for line in block.splitlines())
        for name in VARIABLE.findall(block)
    ]

    assert not twice, f"described more than once: {sorted(twice)}"
    assert not undescribed, f"without a comment saying what it is: {undescribed}"


def test_the_scan_finds_each_way_the_code_reads_a_variable() -> None:
    source = (
        'env_int("A_INT", default=1)\nos.environ.get("B_GET")\nos.environ["C_ITEM"]\n'
        'env.get("D_MAPPING")\nos.getenv("E_GETENV")\nos.environ["NOT_READ"] = "x"\n'
    )

    assert names_read_in_python(source) == {"A_INT", "B_GET", "C_ITEM", "D_MAPPING", "E_GETENV"}


def test_the_scan_reads_the_settings_the_run_command_and_compose_use() -> None:
    read = names_read_by_the_code()

    assert {"DJANGO_SECRET_KEY", "SHUTDOWN_GRACE_SECONDS", "HOST", "POSTGRES_PASSWORD", "CHROMIUM_PATH"} <= read
