"""Data grids sized to what they show, and chart titles broken into lines that fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slarouter_core.live.charts import TITLE_CHARS, ChartFrame, title_text, wrap_title
from slarouter_core.live.tables import (GRID_CHAR_PX, MAIN_WIDTH, grid_cell_text, grid_columns, short_names)
from tests.core.live.zoo_frames import ZOO_NAMES


def test_every_column_is_wide_enough_for_its_label_and_every_cell():
    table = pd.DataFrame({"method": [f"{m} only" for m in ZOO_NAMES], "cost mean (USD)": np.geomspace(1e-6, 1, 11),
                          "SLA": ["missed"] * 10 + ["met"], "cheapest": [False] * 10 + [True]})
    cols = grid_columns(table, {"cost mean (USD)": "cost (USD)"}, "%.3g")
    assert cols["cost mean (USD)"]["label"] == "cost (USD)" and cols["cost mean (USD)"]["help"] == "cost mean (USD)"
    assert cols["method"]["help"] is None and cols["cost mean (USD)"]["format"] == "%.3g"
    assert cols["SLA"]["format"] is None
    for name, c in cols.items():
        longest = max([len(c["label"])] + [len(grid_cell_text(v, "%.3g")) for v in table[name]])
        assert c["width"] >= longest * GRID_CHAR_PX
    assert cols["method"]["width"] > cols["SLA"]["width"]  # the longest model name sets it
    assert sum(c["width"] for c in cols.values()) <= MAIN_WIDTH  # an 11-model zoo's table fits the page


def test_cells_are_measured_as_the_grid_writes_them():
    assert grid_cell_text(0.000006044, "%.3g") == "6.04e-06"
    assert grid_cell_text(float("nan")) == "" and grid_cell_text(True) == "[x]" and grid_cell_text("met") == "met"


def test_short_names_drop_the_vendor_only_where_names_stay_apart():
    assert short_names(["meta-llama/Llama-3.1-8B", "qwen/Qwen2.5-7B"]) == ["Llama-3.1-8B", "Qwen2.5-7B"]
    assert short_names(["a/x", "b/x"]) == ["a/x", "b/x"]


def test_long_titles_wrap_at_spaces_and_keep_their_words():
    title = "Running request satisfaction (band: its own 90% lower bound on the requests so far)"
    lines = wrap_title(title)
    assert isinstance(lines, list) and len(lines) == 2
    assert all(len(line) <= TITLE_CHARS for line in lines) and " ".join(lines) == title
    assert wrap_title("Short") == "Short"
    wrapped = wrap_title({"text": title, "subtitle": "s"})
    assert wrapped["subtitle"] == "s" and wrapped["text"] == lines
    chart = ChartFrame("x", pd.DataFrame(), {"title": title, "mark": "line"})
    assert chart.spec["title"] == lines and title_text(chart.spec) == title


def test_streaming_charts_never_cut_a_category_name_on_the_y_axis():
    chart = ChartFrame("events", pd.DataFrame(), {"mark": "tick", "encoding": {"y": {"field": "event"}}})
    assert chart.spec["config"]["axisYDiscrete"]["labelLimit"] == 0 and chart.spec["config"]["aria"] is False
