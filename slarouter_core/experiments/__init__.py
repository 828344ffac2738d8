"""Experiment runner: datasets x benchmarks x methods x seeds x parameters, tidy results.

The comparison of the paper (Table 2) as a grid of independent runs. One run = one
(dataset, benchmark, feedback rate, feedback model, seed, method spec). Per benchmark and
seed the rows are split once (:func:`baselines.split_history`, seeded) into a history
split for the offline methods and a stream every method is evaluated on; all methods get
the same stream with the same feedback plan, built from the cell's feedback model
(``GridConfig.feedback``: IID by default, or bursty, negativity-biased, delayed, drift,
judge labels; see ``docs/EXPERIMENTS.md``, "Feedback models"). Alpha is fixed per
benchmark from the *full* benchmark (default: midpoint of the two most expensive models'
accuracy).

API for scripts and the dashboard::

    ds = load_dataset("../shared/data/messplus_llama3", encoder="minilm")
    cfg = GridConfig(methods=expand_presets(["single", "oracle", "slarouter"]),
                     exclude_benchmarks=("mmlu_abstract_algebra",))
    rows = run_grid(ds, cfg, backend="local", n_jobs=2, progress=lambda done, total: ...)
    agg = aggregate(rows)                       # mean +- std over seeds, SLA, cheapest
    print(format_overview(agg)); print(format_table(agg))

``rows`` has one row per run (see :data:`ROW_COLUMNS`); it does not depend on the
backend, the number of jobs, or the completion order. See ``docs/EXPERIMENTS.md``.

Modules, in the order data flows through them:

- :mod:`.datasets`: data loading (:func:`load_any`, :class:`Dataset`, :func:`load_dataset`)
- :mod:`.alpha`: alpha rules and the "meets alpha over seeds" rule
- :mod:`.specs`: method specs, presets and the ``method:key=value`` form
- :mod:`.feedback_axis`: feedback models as a grid axis
- :mod:`.grid`: :class:`GridConfig` and the fixed-order plan of tasks
- :mod:`.runs`: one task -> one tidy row
- :mod:`.backends`: :func:`run_grid` in process, with joblib or on Ray
- :mod:`.legacy`: the SLARouter-only grid of ``slarouter simulate``
- :mod:`.aggregation`: mean/std over seeds, SLA verdict, cheapest, overview, gaps
- :mod:`.report`: Markdown tables and result files
- :mod:`.paper`: the paper's protocol preset, its scoring beside ours, the published
  Table 2 beside our figures
"""

from .aggregation import QUEUE_METHODS, aggregate, gaps, group_keys, overview
from .alpha import ALPHA_RULES, MEET_SHARE, chance_to_meet, met_rate_interval, paper_rule_alpha, resolve_alpha, seeds_needed
from .backends import ERROR_POLICIES, run_grid
from .datasets import Dataset, ProgressFn, load_any, load_dataset
from .feedback_axis import (FEEDBACK_CHOICES, FEEDBACK_FIELDS, FEEDBACK_PRESETS, feedback_columns, feedback_name, feedback_params,
                            parse_feedback)
from .grid import DEFAULT_HISTORY_FRACTION, PAPER_EXCLUDE, GridConfig, Task, plan_grid
from .legacy import run_slarouter_grid
from .paper import (PAPER_METHODS, PROTOCOLS, Protocol, format_paper_section, paper_scores, protocol_summary,
                    published_comparison)
from .markdown import markdown_table
from .report import (CHEAPEST_NOTE, PIVOT_METRICS, SEEDS_MET_NOTE, SWEEP_LABELS, comparison_table, format_gaps,
                     format_overview, format_table, pivot_table, report_text, write_report,
                     write_results)
from .runs import ROW_COLUMNS, error_row, run_task
from .specs import DEFAULT_METHODS, PRESETS, MethodSpec, comparison_defaults, expand_presets, parse_method

__all__ = ["comparison_defaults", "QUEUE_METHODS", "aggregate", "gaps", "group_keys", "overview", "ALPHA_RULES", "MEET_SHARE", "chance_to_meet", "met_rate_interval",
           "resolve_alpha", "seeds_needed", "ERROR_POLICIES", "run_grid", "Dataset", "ProgressFn", "load_any",
           "load_dataset", "FEEDBACK_CHOICES", "FEEDBACK_FIELDS", "FEEDBACK_PRESETS", "feedback_columns", "feedback_name",
           "feedback_params", "parse_feedback", "DEFAULT_HISTORY_FRACTION", "PAPER_EXCLUDE", "GridConfig", "Task",
           "plan_grid", "run_slarouter_grid", "CHEAPEST_NOTE", "PIVOT_METRICS", "SEEDS_MET_NOTE",
           "SWEEP_LABELS", "comparison_table", "markdown_table", "pivot_table", "report_text", "format_gaps", "format_overview", "format_table", "write_report",
           "write_results", "ROW_COLUMNS", "error_row", "run_task", "DEFAULT_METHODS", "PRESETS", "MethodSpec",
           "expand_presets", "parse_method", "PAPER_METHODS", "PROTOCOLS", "Protocol", "format_paper_section",
           "paper_scores", "protocol_summary", "published_comparison", "paper_rule_alpha"]
