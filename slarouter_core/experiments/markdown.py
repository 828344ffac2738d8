"""Markdown tables for the reports (one place, shared by the report and the paper section)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def _markdown_cell(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else ""
    if isinstance(value, (float, np.floating)):
        return "–" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame) -> str:
    """A frame as a Markdown table (numbers to 4 significant digits, NaN as "–", True as
    "yes"), without the optional ``tabulate`` dependency of ``DataFrame.to_markdown``."""
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    lines = [head, "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(_markdown_cell(v) for v in row) + " |")
    return "\n".join(lines)
