"""The deployment files pass real validators (Kubernetes API schemas, the Compose
Specification, hadolint), and agree with the code where no schema can know (settings, port,
routes, the `sift serve` parser) and with what docs/operations/deployment.md promises."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.manifests import (
    COMPOSE,
    DEPLOY_README,
    DOCKERFILE,
    KUBERNETES,
    KUBERNETES_CLUSTER,
    KUBERNETES_VERSIONS,
    NGINX,
    QUALIFIED_IMAGE,
    REPO_ROOT,
    SECRET_EXAMPLE,
    SIFT_NAME,
    api_container,
    app_routes,
    argv_of,
    compose_complaints,
    default_apply_wait_seconds,
    default_port,
    dockerfile,
    hadolint_complaints,
    load_yaml,
    manifest_files,
    named,
    nginx,
    parse_serve,
    pod_templates,
    port_served,
    redis_options,
    render,
    schema_problems,
    selects,
    settings_env_names,
)

KUSTOMIZATIONS = {"base": KUBERNETES, "cluster": KUBERNETES_CLUSTER}


@pytest.fixture(scope="module", params=sorted(KUSTOMIZATIONS))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """What `kubectl apply -k` applies, for deploy/kubernetes and for the cluster overlay."""
    return render(KUSTOMIZATIONS[request.param])


# -- the validators ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_rendered_objects_match_the_kubernetes_schemas(
    rendered: list[dict[str, Any]], version: str
) -> None:
    assert [p for o in rendered for p in schema_problems(o, version)] == []


def test_every_manifest_file_matches_the_kubernetes_schemas() -> None:
    """Each file on its own too: the example Secret, which no kustomization applies, and the
    overlay's patch."""
    documents = [d for path in manifest_files() for d in yaml.safe_load_all(path.read_text())]
    assert SECRET_EXAMPLE in manifest_files()
    assert [p for d in documents if d for p in schema_problems(d, KUBERNETES_VERSIONS[-1])] == []


def test_every_manifest_file_is_applied_or_an_example() -> None:
    """A file no kustomization names would never be applied: only the example may be."""
    listed = {
        (folder / str(entry)).resolve()
        for folder in KUSTOMIZATIONS.values()
        for key in ("resources", "patches")
        for item in load_yaml(folder / "kustomization.yaml").get(key, ())
        for entry in ([item] if isinstance(item, str) else [item.get("path")])
        if entry
    }
    assert {p for p in manifest_files() if p.resolve() not in listed} == {SECRET_EXAMPLE}


def test_the_compose_file_matches_the_compose_specification() -> None:
    assert compose_complaints() == ""


def test_the_dockerfile_passes_hadolint() -> None:
    assert hadolint_complaints() == ""


#: (file, text, replacement): each breaks the file for one validator.
BROKEN = [
    ("deploy/kubernetes/api.yaml", "replicas: 2", "replicas: two"),
    ("deploy/kubernetes/api.yaml", "readinessProbe:", "readinesProbe:"),
    ("docker-compose.yml", "replicas: 2", "replicas: [2]"),
    ("Dockerfile", "FROM docker.io/library/python:3.11-slim-bookworm", "FROM python:latest"),
]


@pytest.mark.parametrize(("path", "text", "replacement"), BROKEN, ids=[b[2] for b in BROKEN])
def test_the_validators_refuse_a_broken_copy(
    tmp_path: Path, path: str, text: str, replacement: str
) -> None:
    """The validators are wired to the files: a broken copy fails them."""
    copy = tmp_path / path
    copy.parent.mkdir(parents=True, exist_ok=True)
    original = (REPO_ROOT / path).read_text()
    assert text in original, f"the breakage no longer applies to {path}: {text!r}"
    copy.write_text(original.replace(text, replacement, 1))
    if path.endswith(".yaml"):
        for document in yaml.safe_load_all(copy.read_text()):
            if document.get("kind") == "Deployment":
                assert schema_problems(document, KUBERNETES_VERSIONS[-1])
    elif path == "docker-compose.yml":
        assert compose_complaints(copy)
    else:
        assert hadolint_complaints(copy)


# -- what the code says --------------------------------------------------------------------------


def test_every_sift_name_is_a_setting(rendered: list[dict[str, Any]]) -> None:
    """A misspelt SIFT_* variable would be ignored silently."""
    files = [DOCKERFILE, COMPOSE, NGINX, DEPLOY_README, *manifest_files()]
    names = {(p.name, n) for p in files for n in SIFT_NAME.findall(p.read_text())}
    for configmap in named(rendered, "ConfigMap").values():
        names |= {("ConfigMap", key) for key in configmap["data"]}
    assert {(where, n) for where, n in names if n not in settings_env_names()} == set()


def test_every_command_is_sift_serve_on_the_port_it_exposes(rendered: list[dict[str, Any]]) -> None:
    port = default_port()
    instructions = dockerfile()
    cmd = [arguments for keyword, arguments in instructions if keyword == "CMD"][-1]
    assert port_served(yaml.safe_load(cmd)) == port
    assert [a for k, a in instructions if k == "EXPOSE"] == [str(port)]
    assert [a for k, a in instructions if k == "USER"][-1].split(":")[0] not in ("root", "0")
    # The image's default, the embedded Redis, needs a redis-server (Debian's, as CI's).
    runs = " ".join(a for k, a in instructions if k == "RUN")
    assert re.search(r"apt-get install[^&;]*\bredis-server\b", runs)

    services = load_yaml(COMPOSE)["services"]
    assert port_served(services["api"]["command"]) == port
    assert services["api"]["expose"] == [str(port)]

    pod, container = api_container(rendered)
    assert port_served(argv_of(container)) == port
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("http", port)]
    service = named(rendered, "Service")["sift-api"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_command_check_uses_the_real_parser() -> None:
    assert parse_serve(["sift", "serve", "--port", "9000"]).port == 9000
    with pytest.raises(AssertionError, match="refuses"):
        parse_serve(["sift", "serve", "--prot", "9000"])


def test_probes_ask_routes_of_the_app(rendered: list[dict[str, Any]]) -> None:
    """Liveness and readiness on /v1/healthz (tests/deploy/test_probes.py: it answers while
    Redis is down); every path a route; the grace period covers the preStop pause and a POST
    waiting for its chunk."""
    healthcheck = next(a for k, a in dockerfile() if k == "HEALTHCHECK")
    assert re.findall(r"http://127\.0\.0\.1:(\d+)(/\S+?)'", healthcheck) == [
        (str(default_port()), "/v1/healthz")
    ]
    pod, container = api_container(rendered)
    probes = {
        kind: (container[kind]["httpGet"]["path"], container[kind]["httpGet"]["port"])
        for kind in ("livenessProbe", "readinessProbe")
    }
    assert probes == {
        "livenessProbe": ("/v1/healthz", "http"),
        "readinessProbe": ("/v1/healthz", "http"),
    }
    assert {path for path, _ in probes.values()} <= app_routes()
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    wait = float(
        named(rendered, "ConfigMap")["sift-config"]["data"].get(
            "SIFT_APPLY_WAIT_SECONDS", default_apply_wait_seconds()
        )
    )
    # Stopping: the preStop pause, a POST waiting for its chunk, then 5 s to shut down.
    assert pod["terminationGracePeriodSeconds"] >= pause + wait + 5


# -- what docs/operations/deployment.md promises ------------------------------------------------


def test_redis_keeps_an_append_only_file_fsynced_on_every_write_on_a_volume(
    rendered: list[dict[str, Any]],
) -> None:
    compose = load_yaml(COMPOSE)
    redis = compose["services"]["redis"]
    commands = [redis_options(redis["command"])]
    volumes = {v.split(":")[0] for v in redis["volumes"] if v.split(":")[1] == commands[0]["dir"]}
    assert volumes & set(compose["volumes"]), "compose: Redis's --dir is on no named volume"
    for statefulset in named(rendered, "StatefulSet").values():
        container = statefulset["spec"]["template"]["spec"]["containers"][0]
        options = redis_options(argv_of(container))
        claims = {c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert [mounts.get(c) for c in claims] == [options["dir"]], statefulset["metadata"]
        commands.append(options)
    for options in commands:
        assert (options["appendonly"], options["appendfsync"]) == ("yes", "always")
        assert options.get("maxmemory-policy", "noeviction") == "noeviction"


def test_selectors_select_their_pods(rendered: list[dict[str, Any]]) -> None:
    templates = [t["metadata"]["labels"] for _, t in pod_templates(rendered)]
    for workload, template in pod_templates(rendered):
        if workload["kind"] != "Job":
            assert selects(
                workload["spec"]["selector"]["matchLabels"], template["metadata"]["labels"]
            )
    for service in named(rendered, "Service").values():
        assert any(selects(service["spec"]["selector"], t) for t in templates), service
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for policy in named(rendered, kind).values():
            spec = policy["spec"]
            selector = (spec.get("selector") or spec.get("podSelector"))["matchLabels"]
            assert any(selects(selector, t) for t in templates), policy["metadata"]["name"]
    for statefulset in named(rendered, "StatefulSet").values():
        governing = named(rendered, "Service")[statefulset["spec"]["serviceName"]]
        assert governing["spec"]["clusterIP"] == "None"


def test_no_kustomization_applies_the_secret_the_api_reads(rendered: list[dict[str, Any]]) -> None:
    """`kubectl apply -k` must never reset the Secret the operator made
    (docs/operations/deployment.md, Keys); the example holds exactly the keys the API reads,
    the API token not optional."""
    assert named(rendered, "Secret") == {}
    _, container = api_container(rendered)
    reads = {
        e["valueFrom"]["secretKeyRef"]["key"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    example = load_yaml(SECRET_EXAMPLE)
    assert {r["name"] for r in reads.values()} == {example["metadata"]["name"]}
    assert set(reads) == set(example["stringData"]) == {"api-token", "metrics-token"}
    assert not reads["api-token"].get("optional", False)
    assert "kubectl -n sift create secret generic sift-secrets" in DEPLOY_README.read_text()


def test_every_image_is_named_in_full(rendered: list[dict[str, Any]]) -> None:
    """registry/name:tag everywhere; Sift's own is the placeholder docs/operations/deployment.md
    says to replace, the same in compose and Kubernetes."""
    images = [a for k, a in dockerfile() if k == "FROM"]
    images += [s["image"] for s in load_yaml(COMPOSE)["services"].values()]
    images += [c["image"] for _, t in pod_templates(rendered) for c in t["spec"]["containers"]]
    assert [i for i in images if not QUALIFIED_IMAGE.fullmatch(i)] == []
    sift = load_yaml(COMPOSE)["services"]["api"]["image"]
    assert api_container(rendered)[1]["image"] == sift
    assert f"`{sift}`: a placeholder" in DEPLOY_README.read_text()


def test_nginx_re_resolves_the_replicas_and_listens_where_compose_publishes() -> None:
    """Docker's DNS, asked again every few seconds, and a group whose server names are
    re-resolved (`resolve`, nginx 1.27.3 and later) or a variable in proxy_pass."""
    conf = nginx()
    assert re.search(r"\bresolver\s+127\.0\.0\.11\b[^;]*\bvalid=\d+s", conf)
    upstream = re.search(r"upstream\s+(\w+)\s*\{([^}]*)\}", conf)
    assert upstream is not None and f"proxy_pass http://{upstream.group(1)};" in conf
    assert re.search(r"\bzone\s+\w+", upstream.group(2))
    assert re.findall(r"\bserver\s+(\S+)\s[^;]*\bresolve\b", upstream.group(2)) == [
        f"api:{default_port()}"
    ]
    services = load_yaml(COMPOSE)["services"]
    tag = services["proxy"]["image"].rsplit(":", 1)[1]
    version = tuple(int(n) for n in re.findall(r"\d+", tag.split("-")[0]))
    assert version + (0,) * (3 - len(version)) >= (1, 27, 3), tag
    published = [str(p).rsplit(":", 1)[1] for p in services["proxy"]["ports"]]
    assert re.findall(r"\blisten\s+(\d+)", conf) == published


# -- the Redis Cluster overlay -------------------------------------------------------------------


def test_the_cluster_overlay_replaces_the_single_redis() -> None:
    objects = render(KUBERNETES_CLUSTER)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("ConfigMap", "sift-config"),
        ("Deployment", "sift-api"),
        ("Job", "sift-redis-cluster-create"),
        ("Namespace", "sift"),
        ("NetworkPolicy", "sift-redis-cluster"),
        ("PodDisruptionBudget", "sift-api"),
        ("PodDisruptionBudget", "sift-redis-cluster"),
        ("Service", "sift-api"),
        ("Service", "sift-redis-cluster"),
        ("StatefulSet", "sift-redis-cluster"),
    ]
    nodes = named(objects, "StatefulSet")["sift-redis-cluster"]
    options = redis_options(argv_of(nodes["spec"]["template"]["spec"]["containers"][0]))
    assert options["cluster-enabled"] == "yes"
    # With the default, one master down stops every slot (docs/operations/redis-cluster.md).
    assert options["cluster-require-full-coverage"] == "no"
    assert options["cluster-config-file"].startswith(options["dir"].rstrip("/") + "/")

    # The Job joins exactly the StatefulSet's pods into whole masters, three or more.
    job = named(objects, "Job")["sift-redis-cluster-create"]["spec"]["template"]
    script = " ".join(argv_of(job["spec"]["containers"][0]))
    per_master = int(re.findall(r"--cluster-replicas (\d+)", script)[0])
    pods = [int(i) for i in re.findall(r"for i in ([\d ]+); do", script)[0].split()]
    replicas = nodes["spec"]["replicas"]
    assert pods == list(range(replicas))
    assert replicas % (1 + per_master) == 0 and replicas // (1 + per_master) >= 3
    assert "sift-redis-cluster-$i.sift-redis-cluster" in script

    data = named(objects, "ConfigMap")["sift-config"]["data"]
    assert data["SIFT_REDIS_URL"] == f"redis+cluster://{nodes['spec']['serviceName']}:6379"
    assert int(data["SIFT_REDIS_WAIT_REPLICAS"]) <= per_master
    assert data["SIFT_LOG_FORMAT"] == "json"  # the base's settings are kept

    # Who may reach the nodes: the API and the Job on 6379, the nodes on 6379 and the bus.
    policy = named(objects, "NetworkPolicy")["sift-redis-cluster"]["spec"]
    node_labels = nodes["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["podSelector"]["matchLabels"], node_labels)
    api = named(objects, "Deployment")["sift-api"]["spec"]["template"]["metadata"]["labels"]

    def allowed(labels: dict[str, str], port: int) -> bool:
        return any(
            port in {p["port"] for p in rule["ports"]}
            and any(selects(peer["podSelector"]["matchLabels"], labels) for peer in rule["from"])
            for rule in policy["ingress"]
        )

    assert allowed(api, 6379) and allowed(job["metadata"]["labels"], 6379)
    assert allowed(node_labels, 6379) and allowed(node_labels, 16379)


def test_a_copy_with_a_broken_overlay_does_not_render(tmp_path: Path) -> None:
    """kustomize itself refuses a patch of an object that no resource defines."""
    for folder in (KUBERNETES, KUBERNETES_CLUSTER):
        shutil.copytree(folder, tmp_path / folder.name)
    kustomization = tmp_path / KUBERNETES_CLUSTER.name / "kustomization.yaml"
    text = kustomization.read_text()
    kustomization.write_text(text.replace("name: sift-redis\n", "name: sift-redis-old\n", 1))
    with pytest.raises(AssertionError, match="kubectl kustomize"):
        render(kustomization.parent)
