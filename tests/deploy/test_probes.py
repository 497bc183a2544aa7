"""The probes of deploy/kubernetes, asked of the real app on a real redis-server that stops:
readiness stays true (this pod can serve: it answers), and a request gets what the pod
answers while Redis is down, 503 problem+json with Retry-After, instead of the connection
error an empty Service would give (docs/operations/deployment.md, "Probes")."""

from __future__ import annotations

from service.store.embedded import EmbeddedRedis
from tests.support.api import assert_problem, make_settings, running_app
from tests.support.manifests import KUBERNETES, api_container, render


async def test_the_pods_stay_ready_while_redis_is_down(restartable_redis: EmbeddedRedis) -> None:
    _, container = api_container(render(KUBERNETES))
    probes = {
        kind: container[kind]["httpGet"]["path"] for kind in ("readinessProbe", "livenessProbe")
    }
    url = restartable_redis.start()
    async with running_app(make_settings(url)) as (_, http):
        for path in probes.values():
            assert (await http.get(path)).status_code == 200
        assert (await http.get("/v1/readyz")).status_code == 200
        restartable_redis.stop()
        try:
            while_down = {path: await http.get(path) for path in probes.values()}
            request = await http.get("/v1/selectors")
            redis = await http.get("/v1/readyz")
        finally:
            restartable_redis.start()  # a quick shutdown of the app
    assert {path: r.status_code for path, r in while_down.items()} == dict.fromkeys(
        probes.values(), 200
    )
    assert_problem(request, 503)
    assert int(request.headers["retry-after"]) >= 1
    # Whether Redis answers is /v1/readyz's to say, for operators: not a readiness probe.
    assert_problem(redis, 503)
