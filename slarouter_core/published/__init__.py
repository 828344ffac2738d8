"""The paper's published figures, shipped as data: Table 2 (main results) of the SLARouter
paper, transcribed from its LaTeX source into ``paper_table2.json``.

Per benchmark: the published alpha, each single model's cost and accuracy (Qwen3.5 2B /
9B / 35B / 122B), and each router's cost, satisfaction (mean ± std over the paper's seeds)
and model call ratio. The paper's zoo is not the data a user loads: comparisons built
on this say so (:data:`ZOO_NOTE`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping


@dataclass(frozen=True)
class PublishedTable:
    """Table 2 as read from the package data (see the JSON's ``source``)."""

    source: str
    zoo: tuple[str, ...]
    models: tuple[str, ...]
    cost_unit: str
    protocol: Mapping[str, Any]
    benchmarks: Mapping[str, Mapping[str, Any]]
    aliases: Mapping[str, str | None]

    def key(self, benchmark: str) -> str | None:
        """The paper's name for one of our benchmarks (None: the paper does not have it).
        ``mmlu_abstract_algebra`` is one MMLU subject, not the paper's MMLU: no match."""
        if benchmark in self.aliases:
            return self.aliases[benchmark]
        return benchmark if benchmark in self.benchmarks and benchmark != "average" else None

    def alpha(self, key: str) -> float:
        return float(self.benchmarks[key]["alpha"])

    def single(self, key: str) -> dict[str, dict]:
        """Model name -> {cost, satisfaction, ...} for one published benchmark."""
        return dict(self.benchmarks[key]["single"])

    def method(self, key: str, name: str = "SLARouter") -> dict:
        return dict(self.benchmarks[key]["methods"][name])

    @property
    def benchmark_keys(self) -> tuple[str, ...]:
        """The 11 published benchmarks (without the table's average column)."""
        return tuple(k for k in self.benchmarks if k != "average")


@lru_cache(maxsize=1)
def paper_table2() -> PublishedTable:
    """The published Table 2 (read once from the package data)."""
    raw = json.loads(resources.files(__package__).joinpath("paper_table2.json").read_text())
    return PublishedTable(source=raw["source"], zoo=tuple(raw["zoo"]), models=tuple(raw["models"]),
                          cost_unit=raw["cost_unit"], protocol=raw["protocol"], benchmarks=raw["benchmarks"],
                          aliases=raw["aliases"])


#: the line every comparison with the published figures carries
ZOO_NOTE = ("The paper's zoo is Qwen3.5 (2B, 9B, 35B, 122B) on its own benchmark runs; the data loaded here "
            "is another zoo, so published and measured figures are compared per claim (meets alpha, cost "
            "against the single models), never number for number.")

__all__ = ["PublishedTable", "paper_table2", "ZOO_NOTE"]
