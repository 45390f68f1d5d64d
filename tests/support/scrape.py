"""GET /metrics read as Prometheus reads it (its own parser), for tests: each sample by name and labels."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One scrape's samples; a sample not in it reads 0, as a counter that has not moved yet."""

    def __init__(self, text: str) -> None:
        self.samples = {(sample.name, frozenset(sample.labels.items())): sample.value
                        for family in text_string_to_metric_families(text) for sample in family.samples}

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def moved(self, later: Scrape) -> dict[str, float]:
        """What changed between this scrape and `later`: {"name{label=value}": difference}, process figures aside."""
        keys = set(self.samples) | set(later.samples)
        return {_shown(name, labels): later.samples.get((name, labels), 0.0) - self.samples.get((name, labels), 0.0)
                for name, labels in keys
                if name.startswith("expenses_") and later.samples.get((name, labels), 0.0)
                != self.samples.get((name, labels), 0.0)}


def _shown(name: str, labels: frozenset[tuple[str, str]]) -> str:
    return name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(labels)) + "}" if labels else "")


async def scrape(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> Scrape:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Scrape(response.text)
