"""UI-free pieces of the dashboard: settings that travel in a URL (``settings``), tables
and units (``tables``), chart specs and colours (``charts``, ``experiment_charts``), a
live run of routers side by side (``run``) and a hand-feedback session (``hand``).

Which routers exist and how each is shown come from the policy registry
(``router_modes()``, ``router_modes_help()``, ``ROUTER_COLORS``, ``PolicyInfo``). Nothing
here imports Streamlit: the pages only read widgets, call these objects and draw
what they return. Every object that learns (router, queue, trace) is created per user
session by the caller; nothing here is shared between sessions.
"""

from ..policies.registry import DEFAULT_POLICY
from ..policies.registry import POLICY_COLORS as ROUTER_COLORS
from ..policies.registry import choices_help as router_modes_help
from ..policies.registry import names as router_modes
from .charts import (FAST_RENDER, MAX_POINTS, METHOD_COLORS, RATIO_WINDOW, REFERENCE_COLORS,
                     SPARE_COLORS, ChartFrame, color_encoding, model_colors, series_color)
from .experiment_charts import ALPHA_LABEL, comparison_chart, sweep_charts
from .hand import HandRequest, HandRound, HandRouters, HandSession, shat_bars
from .run import (BELIEF_KINDS, LCB_EVERY, ORACLE_MAX_CELLS, ORACLE_SYNC_CELLS, REFERENCES, LiveRun,
                  LiveView, belief_series)
from .settings import (DEFAULT_ROUTERS, ENCODER_CHOICES, LIMITS, ROUTER_FIELDS, SOURCES, STATED_LABEL, DataSpec,
                       RunSettings,
                       changed_settings, check_stated_count, clamp_setting, describe_reset, feedback_model_choices,
                       feedback_model_fields, limit_problem, parse_numbers, parse_stated_levels, settings_change,
                       settings_for_data, settings_from_query, settings_json, settings_method_params,
                       settings_to_query, stated_text, stated_weight, takes_setting, takes_stated_levels,
                       takes_warning_settings)
from .tables import (FRONTIER, benchmark_long_table, display_scale, human_cost, mixture_frontier, zoo_chart,
                     zoo_chart_frame, zoo_table)

__all__ = ["DEFAULT_POLICY", "router_modes", "router_modes_help", "FAST_RENDER", "MAX_POINTS", "METHOD_COLORS", "RATIO_WINDOW", "REFERENCE_COLORS",
           "ROUTER_COLORS", "SPARE_COLORS", "ChartFrame", "color_encoding", "model_colors", "series_color",
           "ALPHA_LABEL", "comparison_chart", "sweep_charts", "HandRequest", "HandRound", "HandRouters", "HandSession", "shat_bars",
           "BELIEF_KINDS", "belief_series", "LCB_EVERY", "ORACLE_MAX_CELLS", "ORACLE_SYNC_CELLS", "REFERENCES", "LiveRun", "LiveView",
           "DEFAULT_ROUTERS", "ENCODER_CHOICES", "LIMITS", "ROUTER_FIELDS", "SOURCES", "STATED_LABEL", "DataSpec", "RunSettings",
           "check_stated_count", "clamp_setting", "parse_stated_levels", "settings_for_data", "stated_text",
           "stated_weight", "takes_setting", "takes_stated_levels", "takes_warning_settings",
           "changed_settings", "describe_reset", "limit_problem", "settings_change", "feedback_model_choices", "feedback_model_fields", "parse_numbers", "settings_from_query",
           "settings_json", "settings_method_params", "settings_to_query", "benchmark_long_table", "FRONTIER", "mixture_frontier", "zoo_chart", "zoo_chart_frame", "display_scale",
           "human_cost", "zoo_table"]
