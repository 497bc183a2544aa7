"""The deployment files agree with the code (tests/support/manifests.py says how), and the
checker finds each kind of disagreement in a deliberately broken copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.manifests import (
    CHECKS,
    COMPOSE,
    DOCKERFILE,
    KUBERNETES,
    KUBERNETES_CLUSTER,
    NGINX,
    UnsupportedKustomization,
    check_all,
    check_command,
    default_port,
    load_kubernetes,
    parse_dockerfile,
    render_kustomization,
    settings_env_names,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_deployment_files_agree_with_the_code(check: str) -> None:
    assert CHECKS[check](REPO_ROOT) == []


def test_what_the_files_promise() -> None:
    """A few facts stated directly, so that a checker that checks nothing cannot pass them."""
    instructions = parse_dockerfile((REPO_ROOT / DOCKERFILE).read_text())
    keywords = [i.keyword for i in instructions]
    assert keywords[0] == "FROM" and "HEALTHCHECK" in keywords and keywords[-1] == "CMD"
    assert [i.arguments for i in instructions if i.keyword == "EXPOSE"] == [str(default_port())]
    compose = yaml.safe_load((REPO_ROOT / COMPOSE).read_text())
    assert compose["services"]["api"]["deploy"]["replicas"] == 2
    assert "--appendfsync" in compose["services"]["redis"]["command"]
    kinds = sorted(o["kind"] for o in load_kubernetes(REPO_ROOT))
    assert kinds == sorted(
        [
            "Namespace",
            "ConfigMap",
            "Secret",
            "Deployment",
            "Service",
            "Service",
            "PodDisruptionBudget",
            "StatefulSet",
            "NetworkPolicy",
        ]
    )
    assert {"SIFT_REDIS_URL", "SIFT_API_TOKEN", "SIFT_LOG_FORMAT"} <= settings_env_names()


def test_what_the_cluster_overlay_promises() -> None:
    """The Redis Cluster overlay, rendered: the API of deploy/kubernetes on six cluster nodes,
    the single Redis gone, and the API told to use the cluster and wait for a replica."""
    objects = render_kustomization(REPO_ROOT / KUBERNETES_CLUSTER)
    named = sorted((o["kind"], o["metadata"]["name"]) for o in objects)
    assert named == [
        ("ConfigMap", "sift-config"),
        ("Deployment", "sift-api"),
        ("Job", "sift-redis-cluster-create"),
        ("Namespace", "sift"),
        ("NetworkPolicy", "sift-redis-cluster"),
        ("PodDisruptionBudget", "sift-api"),
        ("PodDisruptionBudget", "sift-redis-cluster"),
        ("Secret", "sift-secrets"),
        ("Service", "sift-api"),
        ("Service", "sift-redis-cluster"),
        ("StatefulSet", "sift-redis-cluster"),
    ]
    config = next(o for o in objects if o["kind"] == "ConfigMap")["data"]
    assert config["SIFT_REDIS_URL"] == "redis+cluster://sift-redis-cluster:6379"
    assert config["SIFT_REDIS_WAIT_REPLICAS"] == "1"
    assert config["SIFT_LOG_FORMAT"] == "json"  # the base's settings are kept
    nodes = next(o for o in objects if o["kind"] == "StatefulSet")
    assert nodes["spec"]["replicas"] == 6
    assert all(
        o["metadata"].get("namespace") == "sift" for o in objects if o["kind"] != "Namespace"
    )


def test_the_renderer_refuses_what_it_does_not_render(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nimages: [{name: x}]\n")
    with pytest.raises(UnsupportedKustomization, match="images"):
        render_kustomization(tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "resources: []\npatches:\n  - patch: |-\n      kind: ConfigMap\n"
        "      metadata: {name: absent}\n"
    )
    with pytest.raises(UnsupportedKustomization, match="no resource defines"):
        render_kustomization(tmp_path)


def test_command_check_uses_the_real_parser() -> None:
    problems, command = check_command(["sift", "serve", "--port", "9000"], "here", REPO_ROOT)
    assert problems == [] and command.port == 9000
    problems, _ = check_command(["sift", "serve", "--prot", "1"], "here", REPO_ROOT)
    assert problems and "refused by sift's parser" in problems[0]
    problems, _ = check_command(["uvicorn", "service.api.app:create_app"], "here", REPO_ROOT)
    assert any("not the console script" in p for p in problems)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The deployment files and pyproject.toml in a scratch tree, to break on purpose."""
    for name in (DOCKERFILE, COMPOSE, NGINX, "pyproject.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / KUBERNETES, tmp_path / KUBERNETES)
    shutil.copytree(REPO_ROOT / KUBERNETES_CLUSTER, tmp_path / KUBERNETES_CLUSTER)
    return tmp_path


#: (file, text, replacement, a phrase the checker's problem must contain)
BREAKAGES = [
    (DOCKERFILE, "EXPOSE 8000", "EXPOSE 8080", "EXPOSE [8080]"),
    (DOCKERFILE, '"--port", "8000"]', '"--port", "9000"]', "serves on 9000"),
    (DOCKERFILE, '"--port", "8000"]', '"--prot", "8000"]', "refused by sift's parser"),
    (DOCKERFILE, 'CMD ["sift", ', 'CMD ["sifter", ', "not the console script"),
    (DOCKERFILE, "USER 10001:10001", "USER root", "runs as root"),
    (DOCKERFILE, "/v1/healthz', timeout", "/v1/health', timeout", "not a route"),
    (DOCKERFILE, "redis-server \\", "redis-tools \\", "redis-server is not installed"),
    (DOCKERFILE, "RUN pip install .", "RUN pip install sift", "pip install ."),
    (COMPOSE, "      - always", "      - everysec", "--appendfsync always"),
    (COMPOSE, '      - "yes"', '      - "no"', "--appendonly yes"),
    (COMPOSE, "replicas: 2", "replicas: 1", "1 replica(s)"),
    (COMPOSE, "redis-data:/data", "./redis:/data", "no named volume"),
    (COMPOSE, "SIFT_LOG_FORMAT: json", "SIFT_LOGFORMAT: json", "SIFT_LOGFORMAT is not a setting"),
    (COMPOSE, "redis://redis:6379/0", "redis://cache:6379/0", "not the redis service"),
    (COMPOSE, '"8000:8080"', '"8000:8081"', "nginx listens on [8080]"),
    (NGINX, "server api:8000", "server api:8001", "upstream [('api', 8001)]"),
    (f"{KUBERNETES}/api.yaml", "path: /v1/readyz", "path: /v1/ready", "not a route"),
    (f"{KUBERNETES}/api.yaml", "path: /v1/healthz", "path: /v1/readyz", "expected /v1/healthz"),
    (f"{KUBERNETES}/api.yaml", "containerPort: 8000", "containerPort: 9000", "containerPort"),
    (f"{KUBERNETES}/api.yaml", "replicas: 2", "replicas: 1", "1 replica(s)"),
    (f"{KUBERNETES}/api.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"),
    (f"{KUBERNETES}/api.yaml", "key: metrics-token", "key: metric-token", "holds"),
    (
        f"{KUBERNETES}/api.yaml",
        "minAvailable: 1\n  selector:\n    matchLabels:\n      "
        "app.kubernetes.io/name: sift\n      app.kubernetes.io/component: api",
        "minAvailable: 1\n  selector:\n    matchLabels:\n      "
        "app.kubernetes.io/name: sift\n      app.kubernetes.io/component: apis",
        "no PodDisruptionBudget selects",
    ),
    (f"{KUBERNETES}/api.yaml", "targetPort: http", "targetPort: web", "targetPort"),
    (f"{KUBERNETES}/api.yaml", '"--port", "8000"', '"--port", "8001"', "serves on 8001"),
    (f"{KUBERNETES}/configmap.yaml", "SIFT_LOG_FORMAT", "SIFT_LOG_FORMATS", "is not a setting"),
    (f"{KUBERNETES}/configmap.yaml", "redis://sift-redis:6379", "redis://redis:6379", "is not"),
    (f"{KUBERNETES}/secret.yaml", '  metrics-token: ""\n', "", "holds ['api-token']"),
    (f"{KUBERNETES}/redis.yaml", "            - always", "            - everysec", "always"),
    (f"{KUBERNETES}/redis.yaml", "mountPath: /data", "mountPath: /var/data", "persistent"),
    (f"{KUBERNETES}/redis.yaml", "serviceName: sift-redis", "serviceName: redis", "serviceName"),
    (f"{KUBERNETES}/redis.yaml", "            - noeviction", "            - allkeys-lru", "evict"),
    (f"{KUBERNETES}/kustomization.yaml", "  - network-policy.yaml\n", "", "kustomization.yaml"),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster.yaml",
        "            - always",
        "            - everysec",
        "always",
    ),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster.yaml",
        '--cluster-require-full-coverage\n            - "no"',
        '--cluster-require-full-coverage\n            - "yes"',
        "one master down stops every slot",
    ),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster.yaml",
        '--cluster-enabled\n            - "yes"',
        '--cluster-enabled\n            - "no"',
        "--cluster-enabled yes",
    ),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster.yaml",
        "- /data/nodes.conf",
        "- /tmp/nodes.conf",
        "not on the data volume",
    ),
    (f"{KUBERNETES_CLUSTER}/redis-cluster.yaml", "mountPath: /data", "mountPath: /d", "persistent"),
    (f"{KUBERNETES_CLUSTER}/redis-cluster.yaml", "replicas: 6", "replicas: 5", "masters"),
    (f"{KUBERNETES_CLUSTER}/redis-cluster.yaml", "clusterIP: None", "type: ClusterIP", "headless"),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster-create.yaml",
        "--cluster-replicas 1 --cluster-yes",
        "--cluster-replicas 2 --cluster-yes",
        "masters",
    ),
    (
        f"{KUBERNETES_CLUSTER}/redis-cluster-create.yaml",
        "for i in 0 1 2 3 4 5; do",
        "for i in 0 1 2 3 4; do",
        "joins pods [0, 1, 2, 3, 4]",
    ),
    (
        f"{KUBERNETES_CLUSTER}/configmap.yaml",
        "redis+cluster://sift-redis-cluster:6379",
        "redis://sift-redis-cluster:6379",
        "not a redis+cluster:// URL",
    ),
    (
        f"{KUBERNETES_CLUSTER}/configmap.yaml",
        "redis+cluster://sift-redis-cluster:6379",
        "redis+cluster://sift-redis:6379",
        "is not Service",
    ),
    (
        f"{KUBERNETES_CLUSTER}/configmap.yaml",
        'SIFT_REDIS_WAIT_REPLICAS: "1"',
        'SIFT_REDIS_WAIT_REPLICAS: "2"',
        "more replicas than a master has",
    ),
    (
        f"{KUBERNETES_CLUSTER}/configmap.yaml",
        "SIFT_REDIS_WAIT_MS",
        "SIFT_REDIS_WAIT_SECONDS",
        "SIFT_REDIS_WAIT_SECONDS is not a setting",
    ),
    (f"{KUBERNETES_CLUSTER}/network-policy.yaml", "- port: 16379", "- port: 16380", "16379"),
    (
        f"{KUBERNETES_CLUSTER}/network-policy.yaml",
        "app.kubernetes.io/component: api",
        "app.kubernetes.io/component: web",
        "the API pods may not reach",
    ),
    (
        f"{KUBERNETES_CLUSTER}/kustomization.yaml",
        "        name: sift-redis\n  - patch",
        "        name: sift-redis-old\n  - patch",
        "which no resource defines",
    ),
    (
        f"{KUBERNETES_CLUSTER}/kustomization.yaml",
        "  - redis-cluster-create.yaml\n",
        "",
        "names",
    ),
]


@pytest.mark.parametrize(
    ("path", "text", "replacement", "expected"),
    BREAKAGES,
    ids=[f"{path.rsplit('/', 1)[-1]}:{expected}" for path, _, _, expected in BREAKAGES],
)
def test_the_checker_finds_a_broken_copy(
    copy: Path, path: str, text: str, replacement: str, expected: str
) -> None:
    assert check_all(copy) == [], "the untouched copy must pass"
    original = (copy / path).read_text()
    assert text in original, f"the breakage no longer applies to {path}: {text!r}"
    (copy / path).write_text(original.replace(text, replacement, 1))
    problems = check_all(copy)
    assert any(expected in problem for problem in problems), problems
