"""The dashboard tests' page: a browser page that must not reach the network."""

from __future__ import annotations

from dataclasses import dataclass, field

from playwright.sync_api import Page


@dataclass
class OfflinePage:
    """A page that may reach ``origin`` only, and what it tried besides and what failed in it."""

    page: Page
    origin: str
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        """Nothing was fetched from another origin, and no script error happened."""
        assert self.blocked == [], f"requests to other origins: {self.blocked}"
        assert self.errors == [], f"script errors in the page: {self.errors}"
