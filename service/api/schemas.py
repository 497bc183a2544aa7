"""Request shapes of the HTTP API's small JSON bodies, keys, and problem details.

The answers of the selector service are its typed results (``service.selectors.results``);
the bodies of creations and chunks are documented in ``service.api.request_bodies``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from service.names import ANCHORED_NAME


def whole_number(value: Any) -> Any:
    """An integer, or a float that is one (JSON's ``3.0`` is JSON Schema's integer 3)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected an integer")
    return value


#: An integer field that takes ``3`` and ``3.0``, but not ``"3"``, ``3.5`` or ``true``.
WholeNumber = Annotated[int, BeforeValidator(whole_number)]

#: A selector's (stream's, source's) name, anchored for JSON Schema (``service.names``).
NAME_PATTERN = ANCHORED_NAME

#: The key of a JSON Schema that names the setting its ``maximum`` is (``settings_maximum``):
#: a bound the operator sets is stated in the OpenAPI document of the app it runs in.
MAXIMUM_SETTING = "x-sift-maximum-setting"


def at_most_setting(setting: str) -> dict[str, Any]:
    """The ``json_schema_extra`` of a number bounded by ``Settings.<setting>``."""
    return {MAXIMUM_SETTING: setting}


def settings_maximum(schema: Any, settings: Any) -> None:
    """Replace each ``MAXIMUM_SETTING`` in ``schema`` (an OpenAPI document, in place) with the
    ``maximum`` its setting has in ``settings``."""
    if isinstance(schema, dict):
        setting = schema.pop(MAXIMUM_SETTING, None)
        if setting is not None:
            # An optional number (``int | None``) is bounded in its numeric branch.
            numeric = [
                branch
                for branch in schema.get("anyOf", ())
                if isinstance(branch, dict) and branch.get("type") in ("integer", "number")
            ]
            for bounded in numeric or [schema]:
                bounded["maximum"] = getattr(settings, setting)
        for value in schema.values():
            settings_maximum(value, settings)
    elif isinstance(schema, list):
        for value in schema:
            settings_maximum(value, settings)


class ClusterIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"k": 20, "seed": 0}]}
    )
    k: WholeNumber = Field(ge=1, description="Number of clusters, 1 <= k <= n_samples.")
    seed: WholeNumber = Field(
        default=0, ge=0, lt=2**32, description="k-means seed (scikit-learn random_state)."
    )


class MergeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"from": "east"}]})
    source: str = Field(
        alias="from",
        pattern=NAME_PATTERN,
        description="The selector whose data to add: same method and features, a method whose "
        "states merge (GET /v1/methods lists them).",
    )


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    instance: str


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "content": {"application/problem+json": {}}}
    for status in (400, 401, 403, 404, 406, 409, 413, 415, 422, 503)
}


class KeyIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"scopes": ["write"], "prefix": "team-a-", "label": "team A producers"}]
        },
    )
    scopes: list[Literal["read", "write", "admin", "metrics"]] = Field(
        min_length=1,
        max_length=4,
        description="read: GET routes; write: read plus chunks, features, merge, transform and "
        "cluster; admin: everything, including creating and deleting selectors and keys, and "
        "metrics; metrics: GET /metrics only (for a Prometheus scraper). A key with a prefix "
        "never reads /metrics: it names every selector.",
    )
    prefix: str = Field(
        default="",
        max_length=128,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="The key sees and touches only selectors whose names start with this.",
    )
    label: str = Field(default="", max_length=256, description="Free text for operators.")


class KeyInfo(BaseModel):
    id: str
    scopes: list[str]
    prefix: str
    label: str
    created_at: float


class KeyOut(KeyInfo):
    key: str = Field(description="The secret key, shown only in this answer: store it now.")


class KeyList(BaseModel):
    keys: list[KeyInfo]


#: An alert's URL: http or https, a host name or an IPv4 address (no credentials; an IPv6 host
#: goes by its name), an optional port (1-65535), then any visible characters.
#: ``service.monitoring.destinations`` checks the same, normalises it and judges its host.
_PORT = (
    r"(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
)
_HOST = r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?"
WEBHOOK_URL_PATTERN = rf"^[Hh][Tt][Tt][Pp][Ss]?://{_HOST}{_PORT}([/?#][\x21-\x7e]*)?$"


class AlertIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/sift",
                    "h": 10,
                    "threshold": 0.3,
                    "min_stability": 0.6,
                    "label": "news: the top 10 moved",
                }
            ]
        },
    )
    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=WEBHOOK_URL_PATTERN,
        description="Where events are POSTed: http or https, without credentials, a global "
        "address unless SIFT_ALERT_PRIVATE allows it (and one of SIFT_ALERT_HOSTS when set). "
        "For kind alertmanager, the Alertmanager's base URL (its API v2 is under it).",
    )
    kind: Literal["webhook", "alertmanager"] = Field(
        default="webhook",
        description="webhook: the event POSTed as JSON, signed per Standard Webhooks; "
        "alertmanager: an alert POSTed to Prometheus Alertmanager's /api/v2/alerts, firing "
        "while the drift is over the threshold, resolved when a version is judged below it.",
    )
    # The bound before the validator: JSON Schema's minimum (after it, an unknown keyword).
    h: (
        Annotated[
            int,
            Field(ge=1, json_schema_extra=at_most_setting("history_top")),
            BeforeValidator(whole_number),
        ]
        | None
    ) = Field(
        default=None,
        description="The top h compared: at most SIFT_HISTORY_TOP (100), and on a selector of "
        "d features (a multi-view selector: its widest view) at most d - 1, which already "
        "orders all d (the stability of a top of every feature is undefined). Default: 10, or "
        "d - 1 if smaller.",
    )
    threshold: float = Field(
        gt=0,
        le=1,
        description="Drift since the baseline (1 - rank-biased overlap of the top h) at or over "
        "which a version crosses.",
    )
    min_stability: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Cross only while the version's top h is at least this stable (its "
        "stability index): a ranking that moved and settled, not one that is merely noisy.",
    )
    label: str = Field(default="", max_length=256, description="Free text, sent with events.")
