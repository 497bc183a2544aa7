"""The checker of the deployment files: do they agree with the code?

Docker cannot run on the machines that test Sift, so the deployment files are held to the code
by reading them: every ``SIFT_*`` variable they name is a setting of ``service.config.Settings``;
every port is the port the command serves on, which is Settings' default; every probe path is a
route of the app; every command is the ``sift`` console script of ``pyproject.toml`` with
arguments its parser accepts; Redis keeps an append-only file fsynced on every write, on a
volume; Kubernetes selectors select the pods they mean, and the Secret holds exactly the keys
the Deployment reads. The Redis Cluster overlay (``deploy/kubernetes-cluster``) is rendered as
``kubectl apply -k`` would (the subset of kustomize it uses) and checked the same way: cluster
nodes that keep their AOF and ``nodes.conf`` on a volume, a Job that creates as many masters as
the nodes allow, a ``redis+cluster://`` URL naming their Service, and a NetworkPolicy that lets
the nodes talk to each other.

Each ``check_*`` function returns a list of problems (empty: the files agree). They take the
root of a tree holding the files, so that tests can run them on a broken copy too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from service.client.cli import build_parser
from service.config import Settings

DOCKERFILE = "Dockerfile"
COMPOSE = "docker-compose.yml"
NGINX = "deploy/nginx.conf"
KUBERNETES = "deploy/kubernetes"
#: The kustomize overlay that runs the API on Redis Cluster instead of one Redis.
KUBERNETES_CLUSTER = "deploy/kubernetes-cluster"
#: Files whose SIFT_* names must all be settings.
DEPLOYMENT_FILES = (DOCKERFILE, COMPOSE, NGINX, "deploy/README.md")
#: The module function every container command must end up in.
CLI_ENTRY_POINT = "service.client.cli:main"
SIFT_NAME = re.compile(r"\bSIFT_[A-Z0-9_]*[A-Z0-9]\b")
READINESS_PATH = "/v1/readyz"
LIVENESS_PATH = "/v1/healthz"


# -- what the code says --------------------------------------------------------------------------


def settings_env_names() -> set[str]:
    """Every variable Settings reads (``SIFT_`` + the field name, upper case)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    return {(prefix + name).upper() for name in Settings.model_fields}


def default_port() -> int:
    return int(Settings.model_fields["port"].default)


@cache
def app_routes() -> frozenset[str]:
    """The paths the app serves (built, not started: nothing connects to Redis).

    FastAPI wraps included routers in ``app.routes``; the app lists its routers in
    ``app.state.routers`` (whose routes carry their full paths), as ``api/problems.py`` reads.
    """
    from service.api.app import create_app

    app = create_app(Settings())
    paths = {getattr(route, "path", None) for route in app.routes}
    for router in app.state.routers:
        paths |= {getattr(route, "path", None) for route in router.routes}
    return frozenset(path for path in paths if isinstance(path, str))


def console_scripts(root: Path) -> dict[str, str]:
    project = tomllib.loads((root / "pyproject.toml").read_text())
    return dict(project.get("project", {}).get("scripts", {}))


@dataclass(frozen=True)
class Command:
    """A container's command as the service's CLI understands it."""

    argv: list[str]
    args: argparse.Namespace | None

    @property
    def port(self) -> int | None:
        """The port it serves on (``--port``, else Settings' default)."""
        if self.args is None:
            return None
        given = getattr(self.args, "port", None)
        return int(given) if given is not None else default_port()


def check_command(argv: list[str], where: str, root: Path) -> tuple[list[str], Command]:
    """``argv`` must be the ``sift`` console script with arguments its parser accepts."""
    problems: list[str] = []
    if not argv:
        return [f"{where}: no command"], Command(argv, None)
    scripts = console_scripts(root)
    if scripts.get(argv[0]) != CLI_ENTRY_POINT:
        problems.append(
            f"{where}: the command runs {argv[0]!r}, which is not the console script of "
            f"{CLI_ENTRY_POINT} in pyproject.toml ({scripts})"
        )
    refusal = io.StringIO()
    args: argparse.Namespace | None = None
    try:
        with contextlib.redirect_stderr(refusal), contextlib.redirect_stdout(refusal):
            args = build_parser().parse_args(argv[1:])
    except SystemExit:
        said = refusal.getvalue().strip().splitlines()
        problems.append(
            f"{where}: `{shlex.join(argv)}` is refused by sift's parser: "
            f"{said[-1] if said else 'exit'}"
        )
    if args is not None and args.command != "serve":
        problems.append(f"{where}: the command is `sift {args.command}`, expected `sift serve`")
    return problems, Command(argv, args)


# -- Dockerfile ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with their continuation lines joined; comments and blank lines dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, arguments = whole.partition(" ")
            instructions.append(Instruction(keyword.upper(), arguments.strip()))
    return instructions


def exec_form(arguments: str) -> list[str] | None:
    """The JSON array of an exec-form CMD or ENTRYPOINT, else None (shell form)."""
    if not arguments.startswith("["):
        return None
    parsed = json.loads(arguments)
    return [str(part) for part in parsed] if isinstance(parsed, list) else None


def dockerfile_command(instructions: list[Instruction]) -> tuple[list[str], list[str]]:
    """The image's command (ENTRYPOINT + CMD, exec form) and problems finding it."""
    problems: list[str] = []
    argv: list[str] = []
    for keyword in ("ENTRYPOINT", "CMD"):
        found = [i for i in instructions if i.keyword == keyword]
        if not found:
            continue
        form = exec_form(found[-1].arguments)
        if form is None:
            problems.append(
                f"Dockerfile: {keyword} is in shell form (signals would go to a shell, not to "
                "sift): use the JSON array form"
            )
            continue
        argv += form
    if not argv:
        problems.append("Dockerfile: no CMD or ENTRYPOINT")
    return argv, problems


def check_dockerfile(root: Path) -> list[str]:
    instructions = parse_dockerfile((root / DOCKERFILE).read_text())
    problems: list[str] = []
    bases = [i.arguments for i in instructions if i.keyword == "FROM"]
    if not bases or not re.match(r"python:[0-9.]+-slim", bases[-1]):
        problems.append(f"Dockerfile: the base image should be a python slim image; got {bases}")
    runs = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    if not re.search(r"apt-get install[^&;]*\bredis-server\b", runs):
        problems.append("Dockerfile: redis-server is not installed from Debian (as CI does)")
    if not re.search(r"pip install (\S+ )*\.(\s|$)", runs):
        problems.append("Dockerfile: the package is not installed with `pip install .`")
    users = [i for i in instructions if i.keyword == "USER"]
    user = users[-1].arguments.split(":")[0] if users else "root"
    if user in ("root", "0"):
        problems.append(f"Dockerfile: the image runs as {user}; expected a non-root USER")
    position = {id(i): n for n, i in enumerate(instructions)}
    last_command = max(
        (position[id(i)] for i in instructions if i.keyword in ("CMD", "ENTRYPOINT")), default=-1
    )
    if users and position[id(users[-1])] > last_command >= 0:
        problems.append("Dockerfile: USER comes after the command")
    argv, found = dockerfile_command(instructions)
    problems += found
    command = Command(argv, None)
    if argv:
        checked, command = check_command(argv, "Dockerfile CMD", root)
        problems += checked
    exposed = [
        int(port.split("/")[0])
        for i in instructions
        if i.keyword == "EXPOSE"
        for port in i.arguments.split()
    ]
    if exposed != [default_port()]:
        problems.append(
            f"Dockerfile: EXPOSE {exposed}, expected [{default_port()}] (Settings' port)"
        )
    if command.port is not None and command.port not in exposed:
        problems.append(f"Dockerfile: the command serves on {command.port}, EXPOSE says {exposed}")
    if command.args is not None and command.args.host not in ("0.0.0.0", "::"):
        problems.append(
            f"Dockerfile: the command binds {command.args.host!r}: unreachable from outside"
        )
    checks = [i.arguments for i in instructions if i.keyword == "HEALTHCHECK"]
    if not checks:
        problems.append("Dockerfile: no HEALTHCHECK")
    for check in checks:
        problems += _probe_urls(check, LIVENESS_PATH, command.port, "Dockerfile HEALTHCHECK")
    return problems


def _probe_urls(text: str, expected_path: str, port: int | None, where: str) -> list[str]:
    urls = re.findall(r"https?://[^/'\"\s]+(/[^'\"\s)]*)?", text)
    hosts = re.findall(r"https?://[^:/'\"\s]+:(\d+)", text)
    problems = []
    if expected_path not in urls:
        problems.append(f"{where}: expected a request to {expected_path}; got paths {urls}")
    problems += [f"{where}: {path} is not a route of the app" for path in urls if _unknown(path)]
    if port is not None and any(int(h) != port for h in hosts):
        problems.append(f"{where}: probes port(s) {hosts}, the command serves on {port}")
    return problems


def _unknown(path: str) -> bool:
    return path.split("?")[0] not in app_routes()


# -- docker-compose.yml and nginx ------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _compose_command(value: Any) -> list[str]:
    if isinstance(value, str):
        return shlex.split(value)
    return [str(part) for part in value or ()]


def _environment(value: Any) -> dict[str, str]:
    if isinstance(value, list):
        return dict(str(item).partition("=")[::2] for item in value)
    return {str(k): "" if v is None else str(v) for k, v in (value or {}).items()}


def redis_options(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs of a redis-server command line."""
    options: dict[str, str] = {}
    for n, part in enumerate(argv):
        if part.startswith("--") and n + 1 < len(argv):
            options[part[2:]] = argv[n + 1]
    return options


def redis_aof_problems(argv: list[str], where: str) -> list[str]:
    """Redis must keep an append-only file, fsynced on every write, and never evict."""
    options = redis_options(argv)
    problems = []
    if options.get("appendonly") != "yes":
        problems.append(f"{where}: Redis runs without --appendonly yes ({shlex.join(argv)})")
    if options.get("appendfsync") != "always":
        problems.append(
            f"{where}: Redis fsyncs with {options.get('appendfsync', 'everysec (default)')}, "
            "expected --appendfsync always (an acknowledged chunk survives a crash)"
        )
    if options.get("maxmemory-policy", "noeviction") != "noeviction":
        problems.append(f"{where}: Redis may evict keys (a selector's state would vanish)")
    return problems


def check_compose(root: Path) -> list[str]:
    compose = load_yaml(root / COMPOSE)
    services: dict[str, Any] = compose.get("services", {})
    problems: list[str] = []
    redis = services.get("redis")
    if redis is None:
        return ["docker-compose.yml: no redis service"]
    redis_argv = _compose_command(redis.get("command"))
    problems += redis_aof_problems(redis_argv, "docker-compose.yml redis")
    named = set((compose.get("volumes") or {}).keys())
    data_dir = "/data"
    if "--dir" in redis_argv:
        data_dir = redis_argv[redis_argv.index("--dir") + 1]
    mounts = [str(v).split(":") for v in redis.get("volumes", ())]
    if not any(len(m) >= 2 and m[0] in named and m[1] == data_dir for m in mounts):
        problems.append(
            f"docker-compose.yml: redis keeps {data_dir} on no named volume (mounts {mounts}, "
            f"volumes {sorted(named)})"
        )
    apis = {
        name: service
        for name, service in services.items()
        if _environment(service.get("environment")).get("SIFT_REDIS_URL")
    }
    if len(apis) != 1:
        return [*problems, f"docker-compose.yml: expected one API service; found {sorted(apis)}"]
    api_name, api = next(iter(apis.items()))
    replicas = int((api.get("deploy") or {}).get("replicas", 1))
    if replicas < 2:
        problems.append(f"docker-compose.yml: {api_name} has {replicas} replica(s), expected 2+")
    if api.get("ports"):
        problems.append(
            f"docker-compose.yml: {api_name} publishes ports itself; replicas go behind the proxy"
        )
    build = api.get("build")
    context = build if isinstance(build, str) else (build or {}).get("context")
    if context not in (".", "./"):
        problems.append(f"docker-compose.yml: {api_name} is not built from this Dockerfile")
    port = default_port()
    if "command" in api:
        found, command = check_command(
            _compose_command(api["command"]), f"docker-compose.yml {api_name}", root
        )
        problems += found
        port = command.port or port
    if str(port) not in [str(p).split("/")[0] for p in api.get("expose", [port])]:
        problems.append(f"docker-compose.yml: {api_name} exposes {api.get('expose')}, not {port}")
    environment = _environment(api.get("environment"))
    url = environment["SIFT_REDIS_URL"]
    match = re.fullmatch(r"rediss?://(?:[^@]*@)?([^:/]+):(\d+)(/\d+)?", url)
    if match is None or match.group(1) != "redis" or match.group(2) != "6379":
        problems.append(f"docker-compose.yml: SIFT_REDIS_URL {url!r} is not the redis service")
    if "SIFT_API_TOKEN" not in environment:
        problems.append("docker-compose.yml: the API has no SIFT_API_TOKEN (it serves 0.0.0.0)")
    proxies = {n: s for n, s in services.items() if s.get("ports")}
    if len(proxies) != 1:
        problems.append(f"docker-compose.yml: expected one service with a port; {sorted(proxies)}")
        return problems
    proxy = next(iter(proxies.values()))
    published = [str(p).rsplit(":", 1) for p in proxy["ports"]]
    if len(published) != 1 or len(published[0]) != 2:
        problems.append(f"docker-compose.yml: the proxy should publish one port: {published}")
        return problems
    listen = nginx_listen_ports(root)
    if int(published[0][1]) not in listen:
        problems.append(
            f"docker-compose.yml: the proxy publishes container port {published[0][1]}, nginx "
            f"listens on {listen}"
        )
    upstreams = nginx_upstream_servers(root)
    if not upstreams or any(s != (api_name, port) for s in upstreams):
        problems.append(f"deploy/nginx.conf: upstream {upstreams}, expected {api_name}:{port}")
    return problems


def _nginx_text(root: Path) -> str:
    return re.sub(r"#[^\n]*", "", (root / NGINX).read_text())


def nginx_listen_ports(root: Path) -> list[int]:
    return [int(p) for p in re.findall(r"\blisten\s+(?:[\d.]+:)?(\d+)", _nginx_text(root))]


def nginx_upstream_servers(root: Path) -> list[tuple[str, int]]:
    servers = []
    for block in re.findall(r"upstream\s+\S+\s*\{([^}]*)\}", _nginx_text(root)):
        for host, port in re.findall(r"\bserver\s+([\w.-]+):(\d+)", block):
            servers.append((host, int(port)))
    return servers


# -- Kubernetes ----------------------------------------------------------------------------------


def load_kubernetes(root: Path) -> list[dict[str, Any]]:
    """Every object of every YAML file under deploy/kubernetes (the kustomization apart)."""
    objects = []
    for path in sorted((root / KUBERNETES).glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") != "Kustomization":
                objects.append(document)
    return objects


def _by_kind(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == kind}


def _selects(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (non-empty) selects objects with ``labels``."""
    return bool(selector) and all(labels.get(k) == v for k, v in (selector or {}).items())


def _port_of(reference: Any, ports: list[dict[str, Any]]) -> int | None:
    """The container port a probe or Service refers to (by name or number)."""
    for port in ports:
        if reference in (port.get("name"), port.get("containerPort")):
            return int(port["containerPort"])
    return None


def check_kubernetes(root: Path) -> list[str]:
    objects = load_kubernetes(root)
    problems: list[str] = []
    listed = kustomization_resources(root)
    files = {p.name for p in (root / KUBERNETES).glob("*.yaml")} - {"kustomization.yaml"}
    if set(listed) != files:
        problems.append(f"kustomization.yaml lists {sorted(listed)}, the folder has {files}")
    deployments = _by_kind(objects, "Deployment")
    configmaps = _by_kind(objects, "ConfigMap")
    secrets = _by_kind(objects, "Secret")
    services = _by_kind(objects, "Service")
    statefulsets = _by_kind(objects, "StatefulSet")
    budgets = _by_kind(objects, "PodDisruptionBudget")
    if len(deployments) != 1:
        return [f"kubernetes: expected one Deployment (the API); found {sorted(deployments)}"]
    name, deployment = next(iter(deployments.items()))
    where = f"Deployment {name}"
    spec = deployment["spec"]
    pod = spec["template"]
    labels = pod["metadata"].get("labels", {})
    if not _selects(spec["selector"].get("matchLabels"), labels):
        problems.append(f"{where}: its selector does not select its own pods")
    if int(spec.get("replicas", 1)) < 2:
        problems.append(f"{where}: {spec.get('replicas', 1)} replica(s), expected 2+")
    pod_spec = pod["spec"]
    if not (pod_spec.get("securityContext") or {}).get("runAsNonRoot"):
        problems.append(f"{where}: the pod does not set securityContext.runAsNonRoot")
    containers = pod_spec["containers"]
    if len(containers) != 1:
        problems.append(f"{where}: expected one container; found {len(containers)}")
    container = containers[0]
    argv = [*container.get("command", ()), *container.get("args", ())]
    found, command = check_command([str(a) for a in argv], where, root)
    problems += found
    ports = container.get("ports", [])
    if [p.get("containerPort") for p in ports] != [command.port]:
        problems.append(
            f"{where}: containerPort {[p.get('containerPort') for p in ports]}, the command "
            f"serves on {command.port}"
        )
    resources = container.get("resources") or {}
    if not resources.get("requests") or not (resources.get("limits") or {}).get("memory"):
        problems.append(f"{where}: resources need requests and a memory limit")
    for probe, path in (("readinessProbe", READINESS_PATH), ("livenessProbe", LIVENESS_PATH)):
        get = (container.get(probe) or {}).get("httpGet")
        if get is None:
            problems.append(f"{where}: no {probe} over HTTP")
            continue
        if get.get("path") != path:
            problems.append(f"{where}: {probe} asks {get.get('path')}, expected {path}")
        if _unknown(str(get.get("path"))):
            problems.append(f"{where}: {probe} path {get.get('path')} is not a route of the app")
        if _port_of(get.get("port"), ports) != command.port:
            problems.append(f"{where}: {probe} port {get.get('port')!r} is not the served port")
    problems += _environment_problems(container, where, configmaps, secrets)
    api_services = [s for s in services.values() if _selects(s["spec"].get("selector"), labels)]
    if not api_services:
        problems.append(f"kubernetes: no Service selects the pods of {where}")
    for service in api_services:
        for port in service["spec"].get("ports", []):
            if _port_of(port.get("targetPort", port.get("port")), ports) != command.port:
                problems.append(
                    f"Service {service['metadata']['name']}: targetPort "
                    f"{port.get('targetPort')!r} is not the API's port"
                )
    if not any(
        _selects(b["spec"]["selector"].get("matchLabels"), labels) for b in budgets.values()
    ):
        problems.append(f"kubernetes: no PodDisruptionBudget selects the pods of {where}")
    for budget_name, budget in budgets.items():
        if not any(
            _selects(
                budget["spec"]["selector"].get("matchLabels"),
                d["spec"]["template"]["metadata"].get("labels", {}),
            )
            for d in [*deployments.values(), *statefulsets.values()]
        ):
            problems.append(f"PodDisruptionBudget {budget_name}: selects no pods")
    problems += _redis_problems(statefulsets, services, configmaps)
    return problems


def kustomization_resources(root: Path) -> list[str]:
    path = root / KUBERNETES / "kustomization.yaml"
    return [str(r) for r in (load_yaml(path) or {}).get("resources", [])] if path.exists() else []


def _environment_problems(
    container: dict[str, Any],
    where: str,
    configmaps: dict[str, dict[str, Any]],
    secrets: dict[str, dict[str, Any]],
) -> list[str]:
    """Every referenced ConfigMap and Secret exists; the Secret keys are exactly those read."""
    problems: list[str] = []
    read: dict[str, set[str]] = {}
    for source in container.get("envFrom", ()):
        if "configMapRef" in source:
            ref = source["configMapRef"]["name"]
            if ref not in configmaps:
                problems.append(f"{where}: envFrom ConfigMap {ref!r} does not exist")
        if "secretRef" in source:
            problems.append(f"{where}: envFrom a whole Secret: name the keys it reads")
    for variable in container.get("env", ()):
        secret = (variable.get("valueFrom") or {}).get("secretKeyRef")
        if secret is not None:
            read.setdefault(secret["name"], set()).add(secret["key"])
    for secret_name, keys in read.items():
        secret = secrets.get(secret_name)
        if secret is None:
            problems.append(f"{where}: Secret {secret_name!r} does not exist")
            continue
        held = set((secret.get("stringData") or {}) | (secret.get("data") or {}))
        if held != keys:
            problems.append(
                f"Secret {secret_name}: holds {sorted(held)}, the Deployment reads {sorted(keys)}"
            )
    for secret_name in set(secrets) - set(read):
        problems.append(f"Secret {secret_name}: nothing reads it")
    return problems


def _redis_problems(
    statefulsets: dict[str, dict[str, Any]],
    services: dict[str, dict[str, Any]],
    configmaps: dict[str, dict[str, Any]],
) -> list[str]:
    problems: list[str] = []
    if len(statefulsets) != 1:
        return [f"kubernetes: expected one StatefulSet (Redis); found {sorted(statefulsets)}"]
    name, redis = next(iter(statefulsets.items()))
    where = f"StatefulSet {name}"
    spec = redis["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    if not _selects(spec["selector"].get("matchLabels"), labels):
        problems.append(f"{where}: its selector does not select its own pods")
    container = spec["template"]["spec"]["containers"][0]
    argv = [str(a) for a in (*container.get("command", ()), *container.get("args", ()))]
    problems += redis_aof_problems(argv, where)
    problems += _data_volume_problems(spec, container, argv, where)
    governing = services.get(spec.get("serviceName", ""))
    if governing is None or not _selects(governing["spec"].get("selector"), labels):
        problems.append(f"{where}: serviceName {spec.get('serviceName')!r} is not its Service")
        return problems
    ports = container.get("ports", [])
    service_ports = {int(p["port"]) for p in governing["spec"].get("ports", [])}
    for port in governing["spec"].get("ports", []):
        if _port_of(port.get("targetPort", port.get("port")), ports) is None:
            problems.append(f"Service {governing['metadata']['name']}: targetPort not on Redis")
    for configmap_name, configmap in configmaps.items():
        url = (configmap.get("data") or {}).get("SIFT_REDIS_URL")
        if url is None:
            continue
        match = re.fullmatch(r"rediss?://(?:[^@]*@)?([^:/]+):(\d+)(/\d+)?", url)
        if match is None or match.group(1).split(".")[0] != governing["metadata"]["name"]:
            problems.append(f"ConfigMap {configmap_name}: SIFT_REDIS_URL {url!r} is not {name}")
        elif int(match.group(2)) not in service_ports:
            problems.append(
                f"ConfigMap {configmap_name}: SIFT_REDIS_URL port not in {service_ports}"
            )
    return problems


def _data_volume_problems(
    spec: dict[str, Any], container: dict[str, Any], argv: list[str], where: str
) -> list[str]:
    """Redis's ``--dir`` must be a volume claimed per pod (a StatefulSet's claim template)."""
    data_dir = argv[argv.index("--dir") + 1] if "--dir" in argv else "/data"
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", ())}
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", ())}
    if not any(mounts.get(claim) == data_dir for claim in claims):
        return [
            f"{where}: {data_dir} is on no persistent volume claim (claims {sorted(claims)}, "
            f"mounts {mounts})"
        ]
    return []


# -- the Redis Cluster overlay -------------------------------------------------------------------


class UnsupportedKustomization(ValueError):
    """A kustomization uses more of kustomize than ``render_kustomization`` renders."""


#: The fields of a kustomization that ``render_kustomization`` understands.
_KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "namespace", "resources", "patches"}


def _identity(document: Mapping[str, Any]) -> tuple[str, str]:
    return str(document.get("kind")), str((document.get("metadata") or {}).get("name"))


def _merge(target: Any, patch: Any) -> Any:
    """A strategic merge as far as these files need it: mappings merged key by key, anything
    else (lists included) replaced."""
    if isinstance(target, dict) and isinstance(patch, dict):
        merged = dict(target)
        for key, value in patch.items():
            merged[key] = _merge(target.get(key), value) if key in target else value
        return merged
    return patch


def render_kustomization(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl apply -k directory`` applies, for the subset of kustomize these
    files use: ``resources`` (files, or directories with a kustomization of their own),
    ``patches`` by ``path`` or inline (``patch``), one document each and no ``target`` (one
    with ``$patch: delete`` removes its object, any other is merged into the object of the same
    kind and name) and ``namespace``. Anything else
    raises ``UnsupportedKustomization``, so that a file this does not render is never checked
    as if it did."""
    kustomization = load_yaml(directory / "kustomization.yaml") or {}
    unknown = set(kustomization) - _KUSTOMIZATION_FIELDS
    if unknown:
        raise UnsupportedKustomization(
            f"{directory / 'kustomization.yaml'}: {sorted(unknown)} are not rendered by "
            "tests/support/manifests.py"
        )
    objects: list[dict[str, Any]] = []
    for resource in kustomization.get("resources", ()):
        path = (directory / str(resource)).resolve()
        if path.is_dir():
            objects += render_kustomization(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    for patch in kustomization.get("patches", ()):
        if set(patch) == {"path"}:
            text, origin = (directory / patch["path"]).read_text(), directory / patch["path"]
        elif set(patch) == {"patch"}:
            text, origin = str(patch["patch"]), directory / "kustomization.yaml"
        else:
            raise UnsupportedKustomization(
                f"{directory}: only patches by path or inline, without targets, are rendered"
            )
        documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        if len(documents) != 1:
            raise UnsupportedKustomization(f"{origin}: a patch must be one document (kustomize)")
        for document in documents:
            body = {k: v for k, v in document.items() if k != "$patch"}
            found = [n for n, o in enumerate(objects) if _identity(o) == _identity(body)]
            if not found:
                raise UnsupportedKustomization(
                    f"{origin}: patches {_identity(body)}, which no resource defines"
                )
            if document.get("$patch") == "delete":
                del objects[found[0]]
            else:
                objects[found[0]] = _merge(objects[found[0]], body)
    namespace = kustomization.get("namespace")
    if namespace:
        for document in objects:
            if document.get("kind") != "Namespace":
                document.setdefault("metadata", {})["namespace"] = namespace
    return objects


def _overlay_files(root: Path) -> tuple[set[str], set[str]]:
    """The YAML files the overlay's kustomization names, and those its folder holds."""
    directory = root / KUBERNETES_CLUSTER
    kustomization = load_yaml(directory / "kustomization.yaml") or {}
    named = {str(r) for r in kustomization.get("resources", ()) if not str(r).startswith(".")}
    named |= {str(p["path"]) for p in kustomization.get("patches", ()) if "path" in p}
    held = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    return named, held


def _allows(policies: Iterable[dict[str, Any]], target: Mapping[str, str]) -> Callable[..., bool]:
    """Whether the NetworkPolicies that select pods labelled ``target`` let pods labelled
    ``source`` in on ``port``."""

    def allowed(source: Mapping[str, str], port: int) -> bool:
        for policy in policies:
            if not _selects(policy["spec"].get("podSelector", {}).get("matchLabels"), target):
                continue
            for rule in policy["spec"].get("ingress", ()):
                ports = {int(p["port"]) for p in rule.get("ports", ())}
                peers = [p.get("podSelector", {}).get("matchLabels") for p in rule.get("from", ())]
                if (not ports or port in ports) and any(_selects(m, source) for m in peers):
                    return True
        return False

    return allowed


def check_kubernetes_cluster(root: Path) -> list[str]:
    """The Redis Cluster overlay: the API of ``deploy/kubernetes`` on cluster nodes."""
    problems: list[str] = []
    named, held = _overlay_files(root)
    if named != held:
        problems.append(
            f"{KUBERNETES_CLUSTER}/kustomization.yaml names {sorted(named)}, the folder holds "
            f"{sorted(held)}"
        )
    try:
        objects = render_kustomization(root / KUBERNETES_CLUSTER)
    except (UnsupportedKustomization, OSError) as exc:
        return [*problems, str(exc)]
    statefulsets = _by_kind(objects, "StatefulSet")
    services = _by_kind(objects, "Service")
    deployments = _by_kind(objects, "Deployment")
    jobs = _by_kind(objects, "Job")
    budgets = _by_kind(objects, "PodDisruptionBudget")
    policies = list(_by_kind(objects, "NetworkPolicy").values())
    configmaps = _by_kind(objects, "ConfigMap")
    single = _by_kind(load_kubernetes(root), "StatefulSet")
    left = sorted(set(single) & set(statefulsets))
    if left:
        problems.append(f"{KUBERNETES_CLUSTER}: the single Redis {left} is still deployed")
    cluster_sets = {n: s for n, s in statefulsets.items() if n not in single}
    if len(cluster_sets) != 1 or len(deployments) != 1 or len(jobs) != 1:
        return [
            *problems,
            f"{KUBERNETES_CLUSTER}: expected the API Deployment, one StatefulSet of cluster "
            f"nodes and one Job creating the cluster; found {sorted(deployments)}, "
            f"{sorted(cluster_sets)}, {sorted(jobs)}",
        ]
    name, nodes = next(iter(cluster_sets.items()))
    where = f"StatefulSet {name}"
    spec = nodes["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    if not _selects(spec["selector"].get("matchLabels"), labels):
        problems.append(f"{where}: its selector does not select its own pods")
    container = spec["template"]["spec"]["containers"][0]
    argv = [str(a) for a in (*container.get("command", ()), *container.get("args", ()))]
    options = redis_options(argv)
    problems += redis_aof_problems(argv, where)
    problems += _data_volume_problems(spec, container, argv, where)
    if options.get("cluster-enabled") != "yes":
        problems.append(f"{where}: the nodes run without --cluster-enabled yes")
    if options.get("cluster-require-full-coverage") != "no":
        problems.append(
            f"{where}: without --cluster-require-full-coverage no, one master down stops every "
            "slot (README, Redis Cluster)"
        )
    data_dir = options.get("dir", "/data")
    if not options.get("cluster-config-file", "nodes.conf").startswith(data_dir.rstrip("/") + "/"):
        problems.append(f"{where}: --cluster-config-file is not on the data volume {data_dir}")
    ports = {int(p["containerPort"]) for p in container.get("ports", ())}
    if not {6379, 16379} <= ports:
        problems.append(f"{where}: container ports {sorted(ports)}, expected 6379 and 16379")
    governing = services.get(spec.get("serviceName", ""))
    if governing is None or not _selects(governing["spec"].get("selector"), labels):
        problems.append(f"{where}: serviceName {spec.get('serviceName')!r} is not its Service")
        return problems
    if governing["spec"].get("clusterIP") != "None":
        problems.append(f"Service {spec['serviceName']}: not headless (nodes need their names)")
    service_ports = {int(p["port"]) for p in governing["spec"].get("ports", ())}

    # The Job: redis-cli --cluster create over every pod, masters = nodes / (1 + replicas).
    job_name, job = next(iter(jobs.items()))
    job_pod = job["spec"]["template"]
    job_container = job_pod["spec"]["containers"][0]
    script = " ".join(str(a) for a in (*job_container.get("command", ()), *job_container["args"]))
    replicas_of = re.search(r"redis-cli --cluster create \S+ --cluster-replicas (\d+)", script)
    loop = re.search(r"for i in ([\d ]+); do", script)
    node_count = int(spec.get("replicas", 1))
    if replicas_of is None or loop is None:
        problems.append(f"Job {job_name}: no `redis-cli --cluster create` over a loop of pods")
        return problems
    per_master = int(replicas_of.group(1))
    masters, spare = divmod(node_count, 1 + per_master)
    if spare or masters < 3:
        problems.append(
            f"Job {job_name}: {node_count} nodes with --cluster-replicas {per_master} make "
            f"{node_count / (1 + per_master):g} masters; Redis Cluster needs 3 or more, whole"
        )
    indices = sorted(int(i) for i in loop.group(1).split())
    if indices != list(range(node_count)):
        problems.append(f"Job {job_name}: joins pods {indices}, the StatefulSet has {node_count}")
    if f"{name}-$i.{spec['serviceName']}" not in script:
        problems.append(f"Job {job_name}: does not name the pods {name}-<i>.{spec['serviceName']}")

    # What the API is told.
    data = (configmaps.get("sift-config") or {}).get("data") or {}
    url = str(data.get("SIFT_REDIS_URL", ""))
    match = re.fullmatch(r"(rediss?)(\+cluster)?://(?:[^@]*@)?([^:/]+):(\d+)/?", url)
    says_cluster = str(data.get("SIFT_REDIS_CLUSTER", "")).lower() in ("true", "1", "yes")
    if match is None or not (match.group(2) or says_cluster):
        problems.append(
            f"ConfigMap sift-config: SIFT_REDIS_URL {url!r} is not a redis+cluster:// URL (nor "
            "is SIFT_REDIS_CLUSTER set)"
        )
    elif match.group(3).split(".")[0] != governing["metadata"]["name"]:
        problems.append(f"ConfigMap sift-config: SIFT_REDIS_URL {url!r} is not Service {name}")
    elif int(match.group(4)) not in service_ports:
        problems.append(f"ConfigMap sift-config: SIFT_REDIS_URL port not in {service_ports}")
    waits = int(data.get("SIFT_REDIS_WAIT_REPLICAS", 0))
    if waits > per_master:
        problems.append(
            f"ConfigMap sift-config: SIFT_REDIS_WAIT_REPLICAS={waits} waits for more replicas "
            f"than a master has ({per_master}): every write would answer 503"
        )

    # Who may talk to the nodes.
    allowed = _allows(policies, labels)
    api_labels = next(iter(deployments.values()))["spec"]["template"]["metadata"]["labels"]
    for source, port, who in (
        (api_labels, 6379, "the API pods"),
        (job_pod["metadata"].get("labels", {}), 6379, f"Job {job_name}"),
        (labels, 6379, "the other nodes (replication)"),
        (labels, 16379, "the other nodes (cluster bus)"),
    ):
        if not allowed(source, port):
            problems.append(f"NetworkPolicy: {who} may not reach the cluster nodes on {port}")
    if not any(
        _selects(b["spec"]["selector"].get("matchLabels"), labels) for b in budgets.values()
    ):
        problems.append(f"{KUBERNETES_CLUSTER}: no PodDisruptionBudget selects the cluster nodes")
    return problems


# -- environment names ---------------------------------------------------------------------------


def check_environment_names(root: Path) -> list[str]:
    """Every SIFT_* name in the deployment files is a setting (a typo would be ignored)."""
    known = settings_env_names()
    paths = [root / name for name in DEPLOYMENT_FILES if (root / name).exists()]
    paths += sorted((root / KUBERNETES).glob("*.yaml"))
    paths += sorted((root / KUBERNETES_CLUSTER).glob("*.yaml"))
    problems = []
    for path in paths:
        for name in sorted(set(SIFT_NAME.findall(path.read_text())) - known):
            problems.append(f"{path.relative_to(root)}: {name} is not a setting of Settings")
    configmaps = list(_by_kind(load_kubernetes(root), "ConfigMap").values())
    with contextlib.suppress(UnsupportedKustomization, OSError):  # check_kubernetes_cluster says
        configmaps += _by_kind(
            render_kustomization(root / KUBERNETES_CLUSTER), "ConfigMap"
        ).values()
    for configmap in configmaps:
        for key in configmap.get("data") or {}:
            if key not in known:
                problems.append(f"ConfigMap {configmap['metadata']['name']}: {key} is no setting")
    return problems


CHECKS: dict[str, Callable[[Path], list[str]]] = {
    "dockerfile": check_dockerfile,
    "compose": check_compose,
    "kubernetes": check_kubernetes,
    "kubernetes-cluster": check_kubernetes_cluster,
    "environment": check_environment_names,
}


def check_all(root: Path) -> list[str]:
    return [problem for check in CHECKS.values() for problem in check(root)]
