"""The ``slarouter`` command line: import, demo-data, embed, simulate, compare, preflight, serve."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .data import DataValidationError, write_parquet
from .embedding_cache import EmbeddingCache
from .encoders import DEFAULT_ENCODER, DEFAULT_ENCODER_THREADS, EncoderUnavailableError, LazyEncoder
from .experiments import PROTOCOLS, aggregate, format_table, load_any, parse_feedback, run_slarouter_grid
from .experiments.specs import setting_value
from .policies.registry import DEFAULT_POLICY, choices_help, keep_settings
from .policies.registry import names as router_modes
from .simulator import DEFAULT_FEEDBACK_RATE, PAPER_SEEDS

#: the --encoder help of every subcommand
ENCODER_HELP = ("minilm | hashing[:dim] | hf:<id or path>; a transformer may end in +layers=i,j,... to pool "
                "those layers (e.g. minilm+layers=2,4,6)")


def _progress(label: str):
    start = time.time()

    def report(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\r{label}: {done}/{total} ({time.time() - start:.1f} s)", end=end, file=sys.stderr, flush=True)

    return report


def _check_out(path: str | None, what: str, suffixes: tuple[str, ...] | None = None) -> None:
    """Fail before any slow work when ``path`` cannot be written: a parent that is a file,
    the path itself a folder, or (``suffixes``) a file type we do not write."""
    if not path:
        return
    p = Path(path)
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise ValueError(f"{what} {path}: unknown file type {p.suffix or '(none)'!r}; "
                         f"use {', '.join(suffixes)}")
    if p.is_dir():
        raise ValueError(f"{what} {path} is a folder: give a file name")
    _check_parents(p, f"{what} {path}", p.name)


def _check_cache_dir(cache_dir: str | None) -> None:
    if cache_dir is None:
        return
    p = Path(cache_dir)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--cache-dir {cache_dir} is a file: give a folder (it is created when missing)")
    _check_parents(p, f"--cache-dir {cache_dir}", "a folder")


def _check_parents(p: Path, label: str, holds: str) -> None:
    """The nearest existing parent of ``p`` must be a folder (a file there cannot hold it)."""
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{label}: {parent} is a file, so it cannot hold {holds}")
            return


def _load_for_embedding(path: str, cost: str | None):
    """The dataset for ``embed``: only its texts matter, so without ``--cost`` no cost
    column is required (a parquet file without any is read with zero costs)."""
    if cost is not None:
        return load_any(path, cost=cost)
    from .data import DEFAULT_COST, available_metrics, discover_models, from_frame, read_parquet_frame

    p = Path(path)
    if not p.is_file() or p.suffix.lower() in (".csv", ".json", ".jsonl"):
        return load_any(path)
    frame, meta = read_parquet_frame(p)
    models = discover_models(frame.columns)
    metrics = available_metrics(frame, models)
    if DEFAULT_COST in metrics or not models:
        return from_frame(frame, metadata=meta)
    if metrics:
        return from_frame(frame, cost=metrics[0], metadata=meta)
    zero = "__embed_only_cost"
    return from_frame(frame.assign(**{f"{m}_{zero}": 0.0 for m in models}), cost=zero, metadata=meta)


def _embed(data, encoder: str, cache_dir: str | None):
    enc = LazyEncoder(encoder)  # the weights load only if a text is not cached yet
    return EmbeddingCache(cache_dir).embed(data.texts, enc, progress=_progress(f"embedding with {encoder}"))


def cmd_import(args: argparse.Namespace) -> int:
    from .importers import import_messplus
    from .data import from_frame

    _check_out(args.output, "-o/--output")
    frame, report = import_messplus(args.path)
    from_frame(frame)  # validate before writing anything
    out = write_parquet(frame, args.output, metadata={"source": str(args.path), "format": "messplus",
                                                      "import_report": report})
    print(json.dumps(report, indent=2))
    print(f"wrote {out} ({report['rows']} rows)")
    return 0


def cmd_demo_data(args: argparse.Namespace) -> int:
    from .synthetic import generate_demo

    _check_out(args.output, "-o/--output")
    out = generate_demo(args.output, n=args.n, seed=args.seed)
    print(f"wrote synthetic demo data to {out}")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    _check_cache_dir(args.cache_dir)
    data = _load_for_embedding(args.data, args.cost).select(args.benchmark)
    start = time.time()
    if args.backend == "ray" or args.jobs > 1:
        from .embedding_cache import embed_parallel

        n = embed_parallel(data.texts, args.encoder, args.cache_dir, backend=args.backend, n_jobs=args.jobs,
                           chunk=args.chunk, ray_address=args.ray_address,
                           progress=_progress(f"embedding with {args.encoder} ({args.backend}, {args.jobs} jobs)"))
        print(f"{n} new embeddings of {data.n_requests} texts with {args.encoder} in {time.time() - start:.1f} s "
              f"(cache {EmbeddingCache(args.cache_dir).root})")
        return 0
    emb = _embed(data, args.encoder, args.cache_dir)
    print(f"{emb.shape[0]} embeddings of width {emb.shape[1]} with {args.encoder} in {time.time() - start:.1f} s")
    return 0


def add_feedback_args(sp: argparse.ArgumentParser, several: bool = False) -> None:
    """The feedback-model options, shared by ``simulate`` and ``compare`` (one place).

    ``several``: ``--feedback`` takes one or more kinds (a grid axis, ``compare``)."""
    from .feedback import KINDS
    from .judge import JUDGE_PRESETS

    if several:  # a grid axis: kinds, or feedback presets / kind:key=value specs as they are
        sp.add_argument("--feedback", nargs="+", default=None, metavar="MODEL",
                        help=f"how users give feedback (default iid): a kind ({', '.join(KINDS)}), taking the "
                             "options below, or a preset (judge-acpbench, fill-acpbench, fill-gpqa, ...) or "
                             "kind:key=value spec (e.g. iid:judge_fill=acpbench,judge_budget=0.25) as it is; "
                             "several = a grid axis")
    else:
        sp.add_argument("--feedback", choices=list(KINDS), default="iid", help="how users give feedback (default iid)")
    sp.add_argument("--judge", default=None, choices=list(JUDGE_PRESETS),
                    help="labels come from a simulated LLM judge with the paper's error rates (it replaces the "
                         "users' thumbs)")
    sp.add_argument("--judge-fill", default=None, choices=list(JUDGE_PRESETS),
                    help="judge fill-in (the paper's protocol): users' thumbs as given, and a simulated LLM "
                         "judge's verdict on the requests without them")
    sp.add_argument("--judge-budget", type=float, default=None,
                    help="judge fill-in: share of the requests the judge reads, drawn whatever their thumbs "
                         "(its verdict stands in where there are none; default 1.0)")
    sp.add_argument("--no-judge-calibrate", dest="judge_calibrate", action="store_false",
                    help="judge fill-in below a full budget: the judge reads only its share, not also the rated "
                         "answers outside it to calibrate itself (their verdicts never stand in for thumbs)")
    sp.add_argument("--judge-cost", type=float, default=None,
                    help="one judge call in the data's cost unit (default: the cheapest model's mean cost per "
                         "request on each benchmark); added to the operating cost")
    sp.add_argument("--burst-length", type=float, default=50.0, help="bursty: mean on-period (requests)")
    sp.add_argument("--on-fraction", type=float, default=0.25, help="bursty: share of time in bursts")
    sp.add_argument("--negative-ratio", type=float, default=3.0,
                    help="negative: thumbs-down this many times likelier than thumbs-up")
    sp.add_argument("--delay", type=float, default=50.0, help="delayed: steps until feedback arrives")
    sp.add_argument("--delay-dist", default="fixed", choices=["fixed", "geometric"],
                    help="delayed: every delay equal, or geometric with that mean")
    sp.add_argument("--drift-mix", type=float, default=0.1,
                    help="drift: share mixed across the switch (drift needs --mixed)")


def feedback_from_args(args: argparse.Namespace) -> tuple:
    """One ``FeedbackConfig`` per ``--feedback`` kind, with the shared parameter options;
    each is checked against every ``--feedback-rate`` (ValueError naming the problem)."""
    from .feedback import KINDS, FeedbackConfig
    from .judge import JUDGE_PRESETS

    kinds = args.feedback if isinstance(args.feedback, list) else [args.feedback or "iid"]
    rates = args.feedback_rate if isinstance(args.feedback_rate, list) else [args.feedback_rate]
    rates = [DEFAULT_FEEDBACK_RATE if r is None else r for r in rates]  # compare leaves it unset until apply_protocol
    if args.judge_budget is not None and not args.judge_fill:
        raise ValueError("--judge-budget is the share of requests the judge fills in: add --judge-fill")
    if not getattr(args, "judge_calibrate", True) and not args.judge_fill:
        raise ValueError("--no-judge-calibrate describes the judge of --judge-fill: add it")
    out = []
    for kind in dict.fromkeys(kinds):
        if kind in KINDS:
            fcfg = FeedbackConfig(kind=kind, burst_length=args.burst_length, on_fraction=args.on_fraction,
                                  negative_ratio=args.negative_ratio, delay=args.delay, delay_dist=args.delay_dist,
                                  drift_mix=args.drift_mix, judge=JUDGE_PRESETS[args.judge] if args.judge else None,
                                  judge_fill=JUDGE_PRESETS[args.judge_fill] if args.judge_fill else None,
                                  judge_budget=1.0 if args.judge_budget is None else args.judge_budget,
                                  judge_calibrate=getattr(args, "judge_calibrate", True))
        else:  # a preset or a kind:key=value spec, taken as it is
            fcfg = parse_feedback(kind)
        for r in rates:
            fcfg.check_rate(float(r))
        out.append(fcfg)
    return tuple(out)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .router import RouterConfig

    _check_out(args.out, "--out", (".csv", ".json", ".parquet"))
    _check_cache_dir(args.cache_dir)
    data = load_any(args.data, cost=args.cost).select(args.benchmark)
    for w in data.warnings:
        print(f"warning: {w}", file=sys.stderr)
    from .experiments import resolve_alpha

    alpha = args.alpha
    probe = resolve_alpha(alpha, None)  # a number, or a rule name ('midpoint', 'paper', 'medium')
    given = {k: v for k, v in (("c", args.c), ("V", args.V), ("q_max", args.q_max), ("eps", args.eps))
             if v is not None}
    taken = keep_settings(args.mode, given)
    ignored = sorted("--" + k.replace("_", "-") for k in given.keys() - taken.keys())
    if ignored:
        raise ValueError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to --mode "
                         f"{args.mode}")
    taken.update(policy_settings(args.settings))
    router = RouterConfig(alpha=probe, mode=args.mode, **taken)  # validates early
    (fcfg,) = feedback_from_args(args)
    if fcfg.kind == "drift" and not args.mixed:
        raise ValueError("--feedback drift changes the benchmark mix of one stream: add --mixed")
    emb = _embed(data, args.encoder, args.cache_dir)
    _say_judge_cost(fcfg.judge_fill is not None, args.judge_cost)
    results = run_slarouter_grid(data, emb, router=router, alpha=alpha, benchmarks=args.benchmark,
                                 seeds=args.seeds, feedback_rate=args.feedback_rate,
                                 per_benchmark=not args.mixed, progress=_progress("runs"), feedback=fcfg,
                                 judge_cost=args.judge_cost)
    table = format_table(aggregate(results))
    print(table)
    if args.out:
        from .experiments import write_results

        out = write_results(results, args.out)
        print(f"wrote {out}")
    return 0


def _say_judge_cost(fill: bool, given: float | None) -> None:
    """State what a judge call costs (it is added to the operating cost)."""
    if fill:
        what = (f"{given:g} per call (--judge-cost)" if given is not None else
                "per call, the cheapest model's mean cost per request on each benchmark (column judge_call_cost)")
        print(f"judge fill-in: judge calls are charged {what}", file=sys.stderr)


#: the methods ``compare`` runs by default (without ``--protocol``)
COMPARE_METHODS = ("single", "random", "static_mixture", "oracle", "carrot", "causal", "messplus", "slarouter",
                   "slarouter_ddv")


def apply_protocol(args: argparse.Namespace) -> argparse.Namespace:
    """The grid settings of ``--protocol`` (or the usual defaults) wherever a flag was not
    given: every explicit flag overrides the protocol."""
    proto = PROTOCOLS.get(args.protocol) if args.protocol else None
    defaults = dict(methods=list(COMPARE_METHODS), seeds=list(PAPER_SEEDS), alpha=["midpoint"],
                    feedback_rate=[DEFAULT_FEEDBACK_RATE], feedback=["iid"])
    if proto is not None:
        defaults.update(methods=list(proto.methods), seeds=list(proto.seeds), alpha=[proto.alpha],
                        feedback_rate=[proto.feedback_rate])
        if args.feedback is None and args.judge is None and args.judge_fill is None:  # explicit feedback wins
            args.judge_fill = proto.judge_fill
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def _exclusions(args: argparse.Namespace, known=None) -> tuple[str, ...]:
    """The benchmarks ``--exclude`` leaves out (default: the paper's, unless ``--benchmark``
    names some); with the data's benchmarks ``known``, a name it does not have is an error."""
    from .experiments import PAPER_EXCLUDE

    unknown = [b for b in dict.fromkeys(args.exclude or ()) if known is not None and b not in set(known)]
    if unknown:
        raise ValueError(f"--exclude: unknown benchmark {', '.join(map(repr, unknown))}: the data has "
                         f"{', '.join(sorted(known))}")
    return tuple(args.exclude) if args.exclude is not None else (() if args.benchmark else PAPER_EXCLUDE)


def cmd_compare(args: argparse.Namespace) -> int:
    from .experiments import (GridConfig, expand_presets, load_dataset, run_grid,
                              write_report, write_results)

    import pandas as pd

    args = apply_protocol(args)
    if args.protocol:
        print(f"protocol {args.protocol}: {PROTOCOLS[args.protocol].description} (explicit flags override)",
              file=sys.stderr)
    methods = expand_presets(args.methods)  # validates before the slow part
    _check_out(args.out, "--out", (".csv", ".json", ".parquet"))
    _check_out(args.markdown, "--markdown")
    _check_out(args.table_csv, "--table-csv")
    _check_cache_dir(args.cache_dir)
    exclude = _exclusions(args)  # checked against the data once it is read
    alphas = args.alpha if isinstance(args.alpha, list) else [args.alpha]
    configs = [GridConfig(methods=methods, seeds=tuple(args.seeds),
                          benchmarks=tuple(args.benchmark) if args.benchmark else None,
                          exclude_benchmarks=exclude, feedback_rates=tuple(args.feedback_rate),
                          alpha=alpha, history_fraction=args.history_fraction,
                          feedback=feedback_from_args(args), mixed=args.mixed, judge_cost=args.judge_cost)
               for alpha in dict.fromkeys(alphas)]
    _say_judge_cost(any(f.judge_fill is not None for f in configs[0].feedback), args.judge_cost)
    datasets = []
    for path in args.data:
        ds = load_dataset(path, encoder=args.encoder, cost=args.cost, cache_dir=args.cache_dir,
                          progress=_progress(f"embedding {Path(path).name} with {args.encoder}"))
        for w in ds.data.warnings:
            print(f"warning: {w}", file=sys.stderr)
        datasets.append(ds)
    if args.exclude:
        _exclusions(args, {b for ds in datasets for b in ds.data.benchmark_names})
    start = time.time()
    parts = []
    for config in configs:  # one grid per alpha setting (an alpha sweep when several)
        part = run_grid(datasets, config, backend=args.backend, n_jobs=args.jobs, progress=_progress("runs"),
                        ray_address=args.ray_address, on_error="record")
        parts.append(part.assign(alpha_setting=str(config.alpha)) if len(configs) > 1 else part)
    results = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    print(f"{len(results)} runs in {time.time() - start:.1f} s ({args.backend}, {args.jobs} jobs)", file=sys.stderr)
    failed = results["error"].notna() if "error" in results.columns else pd.Series(False, index=results.index)
    if failed.any():  # one method that cannot run in a setting does not abort the grid
        msgs = results.loc[failed, "error"].astype(str)
        print(f"warning: {int(failed.sum())} of {len(results)} runs failed ({', '.join(dict.fromkeys(results.loc[failed, 'method'].astype(str)))}); "
              "their rows carry the error:", file=sys.stderr)
        for msg in list(dict.fromkeys(msgs))[:10]:
            print(f"  {msg}", file=sys.stderr)
        if failed.all():
            raise ValueError("every run failed: nothing to report")
    if args.out:
        write_results(results, args.out)
    print(write_report(results, markdown=args.markdown, table_csv=args.table_csv))
    for out in (args.out, args.markdown, args.table_csv):
        if out:
            print(f"wrote {out}", file=sys.stderr)
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    """Before the first request: can this SLA be certified with this feedback, and what does
    a certifying router pay at least (:mod:`.preflight`)."""
    from .judge import JUDGE_PRESETS
    from .policies.contextual import DEFAULT_WINDOW
    from .preflight import PreflightConfig, preflight

    window = args.window
    if (args.judge_budget is not None or args.judge_cost is not None or not args.judge_calibrate) \
            and not args.judge_fill:
        raise ValueError("--judge-budget, --judge-cost and --no-judge-calibrate describe the judge of --judge-fill: "
                         "add it")
    if args.text and args.zoo is not None:
        raise ValueError("--text learns from a log's outcomes: give --data")
    from .experiments import ALPHA_RULES, resolve_alpha

    budget = args.judge_budget
    calibrate = args.judge_calibrate
    if args.zoo is not None:
        from .service.zoo import NOMINAL_INPUT_TOKENS, NOMINAL_OUTPUT_TOKENS, load_zoo

        if args.benchmark or args.exclude:
            raise ValueError("--benchmark and --exclude select benchmarks of --data, not models of --zoo")
        zoo = load_zoo(args.zoo)
        if not zoo.stated_levels:
            raise ValueError(f"{args.zoo}: the pre-flight check needs each model's accuracy; give 'accuracy' on "
                             "every model of the zoo file (a leaderboard's, or your own evaluation's)")
        if args.alpha in ALPHA_RULES:
            raise ValueError(f"--alpha {args.alpha}: a rule reads a benchmark log (--data); give a number for --zoo")
        alpha = resolve_alpha(args.alpha, None)
        names, acc, cost = zoo.names, zoo.stated_levels, [m.nominal_price for m in zoo.models]
        judge_cost = args.judge_cost
        if args.judge_fill and zoo.judge is not None:  # the zoo's judge: its price and budget
            nominal = zoo.judge.price(NOMINAL_INPUT_TOKENS, NOMINAL_OUTPUT_TOKENS)
            judge_cost = nominal if judge_cost is None else judge_cost
            budget = zoo.judge.budget if budget is None else budget
            calibrate = calibrate and zoo.judge.calibrate
        window = DEFAULT_WINDOW if window is None else window
        where = (f"{args.zoo}: stated accuracies; each model's (and the judge's) price for a nominal request of "
                 f"{NOMINAL_INPUT_TOKENS} prompt and {NOMINAL_OUTPUT_TOKENS} completion tokens")
    else:
        data = load_any(args.data, cost=args.cost)
        exclude = _exclusions(args, data.benchmark_names)
        data = data.select(args.benchmark) if args.benchmark else data
        dropped = [b for b in exclude if b in data.benchmark_names]
        data = data.without(dropped) if dropped else data
        for w in data.warnings:
            print(f"warning: {w}", file=sys.stderr)
        alpha = resolve_alpha(args.alpha, data)
        names, acc, cost = data.models, data.solved.mean(0), data.costs.mean(0)
        judge_cost = args.judge_cost
        window = data.n_requests if window is None else window
        where = (f"{args.data}: {data.n_requests:,} requests"
                 + (f" ({', '.join(data.benchmark_names)})" if len(data.benchmark_names) <= 12 else ""))
    cfg = PreflightConfig(alpha=alpha, feedback_rate=args.feedback_rate, window=int(window), delta=args.delta,
                          guarantee=args.guarantee,
                          judge=JUDGE_PRESETS[args.judge_fill] if args.judge_fill else None,
                          judge_budget=1.0 if budget is None else budget, judge_cost=judge_cost,
                          judge_calibrate=calibrate,
                          residual_var=args.residual_var)
    result = preflight(acc, cost, cfg, names)
    floor = None
    if args.text and result.certifiable:
        from .preflight import check_text_floor

        _check_cache_dir(args.cache_dir)
        floor = check_text_floor(result, data.solved, data.costs, _embed(data, args.encoder, args.cache_dir))
    if args.json:
        out = result.to_dict()
        if args.text:
            out.update(text_floor=None if floor is None else floor[0], text_labels=None if floor is None else floor[1],
                       text_judged=None if floor is None else floor[2], encoder=args.encoder)
        print(json.dumps(out, indent=2))
        return 0
    print(where)
    for name, a, c in zip(result.models, result.accuracy, result.mean_cost):
        print(f"  {name}: accuracy {100 * a:.1f}%, mean cost {c:.4g} ({result.ratio(c):.3f}x the static mixture)")
    for line in result.report():
        print(line)
    if floor is not None:
        verdicts = f" and {floor[2]:,} calibrated verdicts" if floor[2] else ""
        print(f"with the text ({args.encoder}): a text model learned from {floor[1]:,} thumbs{verdicts} (uniform over "
              f"models, on half the log) and perfect control would pay {floor[0]:.2f}x at best for that satisfaction "
              "on the other half" + (", the judge's calls included" if floor[2] else "") + "; a router learning while "
              "it serves pays more (docs/RESULTS.md, \"Before the first request\")")
    elif args.text:
        print("with the text: nothing to price, the SLA cannot be certified")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .service.auth import MASTER_KEY_ENV, ApiKeys
    from .service.core import RoutingService, ServiceConfig
    from .service.server import serve
    from .service.zoo import load_zoo

    zoo = load_zoo(args.zoo)
    zoo.check_environment()
    keys = ApiKeys.load(args.api_keys_file)
    if keys is None and not args.no_auth:
        raise ValueError(f"no API keys: set {MASTER_KEY_ENV} or give --api-keys-file (one key per line); "
                         "--no-auth serves without keys (only where nobody else can reach the port)")
    config = ServiceConfig(alpha=args.alpha, mode=args.mode, encoder=args.encoder, state_dir=args.state_dir,
                           checkpoint_every_s=args.checkpoint_every, seed=args.seed, instance=args.instance,
                           max_body_bytes=args.max_body_bytes, encoder_runtime=args.encoder_runtime,
                           encoder_threads=args.threads, embed_wait_ms=args.embed_wait_ms,
                           settings=policy_settings(args.settings))
    service = RoutingService(zoo, config)
    print(f"routing over {', '.join(zoo.names)} (cheapest first) at alpha {config.alpha}, mode {config.mode}; "
          f"state in {config.state_dir}" + (f" (restored, {service.replayed} journal events replayed)"
                                            if service.restored else "")
          + ("; NO AUTHENTICATION" if keys is None else f"; {len(keys.digests)} API key(s)"), file=sys.stderr)
    pre = service.preflight()
    if pre is not None:  # the zoo states accuracies: say now whether its SLA can be certified
        print(f"pre-flight (thumbs rate {pre['feedback_rate_source']}; GET /v1/state has it as traffic comes):",
              file=sys.stderr)
        for line in pre["report"][1:]:
            print(f"  {line}", file=sys.stderr)
    serve(service, host=args.host, port=args.port, torch_threads=args.threads, api_keys=keys)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    _check_cache_dir(args.cache_dir)
    cache = EmbeddingCache(args.cache_dir)
    if args.action == "info":
        rows = cache.info()
        if not rows:
            print(f"embedding cache {cache.root}: empty")
        for r in rows:
            legacy = f", {r['legacy_shards']} old-format shard(s) (converted on next use)" if r["legacy_shards"] else ""
            hint = "; run 'slarouter cache compact'" if r["parts"] > 16 else ""
            print(f"{r['encoder']} (width {r['dim']}): {r['vectors']:,} vectors in {r['parts']} part(s), "
                  f"{r['bytes'] / 1e6:,.1f} MB{legacy}{hint}  [{cache.root / r['cache_id']}]")
    elif args.action == "compact":
        try:
            done = cache.compact(args.encoder)
        except RuntimeError as exc:  # the folder cannot be locked
            raise ValueError(str(exc)) from None
        for r in done:
            print(f"{r['encoder']}: {r['parts_before']} -> {r['parts_after']} part(s)")
    else:
        freed = cache.clear(args.encoder)
        print(f"removed {freed / 1e6:,.1f} MB of cached embeddings from {cache.root}")
    return 0


def policy_settings(items: list[str]) -> dict:
    """``--set KEY=VALUE`` options as settings (values read as JSON where they parse);
    the router config says which keys its policy takes."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--set needs KEY=VALUE, got {item!r}")
        out[key.strip()] = setting_value(value)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="slarouter", description="SLA-constrained, cost-optimal LLM routing.")
    sub = p.add_subparsers(dest="command", required=True)

    imp = sub.add_parser("import", help="convert other log formats to the canonical parquet")
    imp_sub = imp.add_subparsers(dest="format", required=True)
    mp = imp_sub.add_parser("messplus", help="MESS+ CSV/JSON logs (a file or a folder tree)")
    mp.add_argument("path")
    mp.add_argument("-o", "--output", required=True)
    mp.set_defaults(func=cmd_import)

    demo = sub.add_parser("demo-data", help="write the synthetic demo dataset")
    demo.add_argument("-o", "--output", default="data/demo.parquet")
    demo.add_argument("--n", type=int, default=3000)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo_data)

    def data_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--data", required=True, help="canonical parquet, or MESS+ file/folder")
        sp.add_argument("--benchmark", nargs="+", default=None, help="benchmarks to use (default: all)")
        sp.add_argument("--encoder", default=DEFAULT_ENCODER, help=ENCODER_HELP)
        sp.add_argument("--cache-dir", default=None, help="embedding cache (default ~/.cache/slarouter)")

    emb = sub.add_parser("embed", help="compute and cache embeddings")
    data_args(emb)
    emb.add_argument("--cost", default=None,
                     help="per-model cost metric to validate (default: none needed, only the texts are read)")
    emb.add_argument("--backend", choices=["local", "ray"], default="local",
                     help="ray: encode on Ray workers into the (shared) cache folder")
    emb.add_argument("--jobs", type=int, default=1, help="parallel workers / Ray CPUs (default 1)")
    emb.add_argument("--chunk", type=int, default=100_000, help="texts per worker task (default 100000)")
    emb.add_argument("--ray-address", default=None, help="join this Ray cluster (default: a local runtime)")
    emb.set_defaults(func=cmd_embed)

    cch = sub.add_parser("cache", help="the embedding cache: info, compact (merge parts), clear")
    cch.add_argument("action", choices=["info", "compact", "clear"])
    cch.add_argument("--cache-dir", default=None, help="embedding cache (default ~/.cache/slarouter/embeddings)")
    cch.add_argument("--encoder", default=None, help="only this encoder (its spec, e.g. minilm, or cache id)")
    cch.set_defaults(func=cmd_cache)

    sim = sub.add_parser("simulate", help="simulate SLARouter on logged data")
    data_args(sim)
    sim.add_argument("--alpha", required=True,
                     help="SLA level in (0,1), or a rule per benchmark: 'midpoint' (between the two most "
                          "expensive models), 'paper' (the paper's rule for any zoo size) or 'medium' (1 point "
                          "below the second most expensive)")
    sim.add_argument("--c", type=float, default=None, help="exploration constant (default 0.1)")
    sim.add_argument("--V", type=float, default=None, help="fixed V (default: data-driven)")
    sim.add_argument("--q-max", type=float, default=None, help="Q_max for data-driven V (default 30)")
    sim.add_argument("--eps", type=float, default=None, help="epsilon for data-driven V (default 0.001)")
    sim.add_argument("--feedback-rate", type=float, default=DEFAULT_FEEDBACK_RATE)
    sim.add_argument("--seeds", type=int, nargs="+", default=list(PAPER_SEEDS))
    sim.add_argument("--cost", default="energy_joules", help="per-model cost metric (default energy_joules)")
    sim.add_argument("--mixed", action="store_true", help="one mixed stream instead of one per benchmark")
    sim.add_argument("--out", default=None, help="results file (.csv, .json or .parquet)")
    sim.add_argument("--mode", default=DEFAULT_POLICY, choices=list(router_modes()),
                     help=choices_help("; ") + " (docs/IMPROVED.md)")
    sim.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                     help="any setting of the chosen policy, the value read as JSON where it parses (repeatable; "
                          "e.g. --set delta=0.1 --set 'stated_levels=[0.5,0.7,0.9]')")
    add_feedback_args(sim)
    sim.set_defaults(func=cmd_simulate)

    cmp_ = sub.add_parser("compare", help="SLARouter vs the baselines (paper Table 2) over benchmarks and seeds")
    cmp_.add_argument("--data", required=True, nargs="+", help="one or more datasets (parquet, or MESS+ file/folder)")
    cmp_.add_argument("--benchmark", nargs="+", default=None, help="benchmarks (default: all but mmlu_abstract_algebra)")
    cmp_.add_argument("--exclude", nargs="*", default=None, help="benchmarks to leave out")
    cmp_.add_argument("--protocol", default=None, choices=list(PROTOCOLS),
                      help="paper: the paper's protocol (judge fill-in with an ACPBench-grade judge, the paper's "
                           "alpha rule, V=1e-5 and data-driven V, c=0.1, SGD lr 0.006, batch 16, seeds 42 1 1234, "
                           "the paper's methods); every flag given explicitly overrides it")
    cmp_.add_argument("--methods", nargs="+", default=None,
                      help=f"(default: {' '.join(COMPARE_METHODS)}) presets (single random static_mixture oracle "
                           "carrot causal messplus slarouter slarouter_ddv, and slarouter_<mode> for every other "
                           f"mode: {' '.join('slarouter_' + m for m in router_modes() if m != DEFAULT_POLICY)}) "
                           "or method:key=value,... "
                           "e.g. slarouter:mode=contextual or slarouter:V=0.0001")
    cmp_.add_argument("--seeds", type=int, nargs="+", default=None, help=f"(default {' '.join(map(str, PAPER_SEEDS))})")
    cmp_.add_argument("--feedback-rate", type=float, nargs="+", default=None,
                      help=f"one or more rates (a grid axis; default {DEFAULT_FEEDBACK_RATE})")
    add_feedback_args(cmp_, several=True)
    cmp_.add_argument("--mixed", action="store_true",
                      help="one stream over all selected benchmarks per dataset (needed by --feedback drift)")
    cmp_.add_argument("--alpha", default=None, nargs="+",
                      help="SLA level(s) in (0,1), or a rule per benchmark: 'midpoint' (default), 'paper' (the "
                           "paper's rule for any zoo size: the whole point below what the cheapest model near the best "
                           "and the dearer ones near it reach) or 'medium' (1 point below the second most expensive "
                           "model); several = an alpha sweep")
    cmp_.add_argument("--history-fraction", type=float, default=0.2,
                      help="share of each benchmark held out as history for CARROT/Causal (default 0.2)")
    cmp_.add_argument("--encoder", default=DEFAULT_ENCODER, help=ENCODER_HELP)
    cmp_.add_argument("--cache-dir", default=None, help="embedding cache (default ~/.cache/slarouter)")
    cmp_.add_argument("--cost", default="energy_joules", help="per-model cost metric (default energy_joules)")
    cmp_.add_argument("--backend", choices=["local", "ray"], default="local")
    cmp_.add_argument("--jobs", type=int, default=1, help="worker processes / Ray CPUs (default 1)")
    cmp_.add_argument("--ray-address", default=None, help="join this Ray cluster (default: start a local runtime)")
    cmp_.add_argument("--out", default=None, help="tidy results, one row per run (.csv, .parquet or .json)")
    cmp_.add_argument("--markdown", default=None, help="write the Table-2 report here (.md)")
    cmp_.add_argument("--table-csv", default=None, help="write the aggregated table here (.csv)")
    cmp_.set_defaults(func=cmd_compare)

    from .judge import JUDGE_PRESETS
    from .policies.contextual import DEFAULT_WINDOW

    pre = sub.add_parser("preflight", help="before the first request: can the SLA be certified with this feedback, "
                                           "and what does a certifying router pay at least")
    src = pre.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", default=None, help="a benchmark log (parquet, or MESS+ file/folder): each model's "
                                                  "accuracy and mean cost")
    src.add_argument("--zoo", default=None, help="a zoo file (TOML) with 'accuracy' on every model: stated "
                                                 "accuracies, and each model's price for a nominal request")
    pre.add_argument("--benchmark", nargs="+", default=None, help="--data: benchmarks to use (default: all but "
                                                                  "mmlu_abstract_algebra)")
    pre.add_argument("--exclude", nargs="*", default=None, help="--data: benchmarks to leave out")
    pre.add_argument("--cost", default="energy_joules", help="--data: per-model cost metric (default energy_joules)")
    pre.add_argument("--alpha", required=True,
                     help="SLA level in (0,1); with --data also a rule: 'midpoint', 'paper' or 'medium'")
    pre.add_argument("--feedback-rate", type=float, default=DEFAULT_FEEDBACK_RATE,
                     help=f"share of requests with thumbs (default {DEFAULT_FEEDBACK_RATE})")
    pre.add_argument("--window", type=int, default=None,
                     help=f"requests per SLA window (default: the log's requests; {DEFAULT_WINDOW:,} "
                          "with --zoo, as the service)")
    pre.add_argument("--delta", type=float, default=0.05, help="the bound's miss probability (default 0.05)")
    pre.add_argument("--guarantee", default="window", choices=["window", "anytime"],
                     help="window: a bound at the window's end (default); anytime: a confidence sequence")
    pre.add_argument("--judge-fill", default=None, choices=list(JUDGE_PRESETS),
                     help="an LLM judge with these error rates reads the answers without thumbs")
    pre.add_argument("--judge-budget", type=float, default=None,
                     help="share of the answers the judge reads, whatever their thumbs (default: the zoo's judge "
                          "budget, else 1.0)")
    pre.add_argument("--no-judge-calibrate", dest="judge_calibrate", action="store_false",
                     help="below a full budget the judge reads only its share, not also the other rated answers "
                          "to calibrate itself (default: it does, unless the zoo's judge says calibrate = false)")
    pre.add_argument("--judge-cost", type=float, default=None,
                     help="one judge call in the costs' unit (default: the zoo's judge price, else the cheapest "
                          "model's mean cost)")
    pre.add_argument("--residual-var", type=float, default=None,
                     help="your text model's measured residual variance (default: text-blind)")
    pre.add_argument("--text", action="store_true",
                     help="--data: also the least a router pays when its text model has learned all it can from "
                          "a window's thumbs (embeds the log's texts with --encoder)")
    pre.add_argument("--encoder", default=DEFAULT_ENCODER, help="--text: " + ENCODER_HELP)
    pre.add_argument("--cache-dir", default=None, help="--text: embedding cache (default ~/.cache/slarouter)")
    pre.add_argument("--json", action="store_true", help="print the figures as JSON")
    pre.set_defaults(func=cmd_preflight)

    srv = sub.add_parser("serve", help="OpenAI-compatible routing service in front of a model zoo (TOML)")
    srv.add_argument("--zoo", required=True, help="zoo file (TOML; see slarouter_core/service/zoo.py)")
    srv.add_argument("--alpha", type=float, required=True, help="SLA level in (0,1)")
    srv.add_argument("--mode", default=DEFAULT_POLICY, choices=list(router_modes()),
                     help=f"router mode (default {DEFAULT_POLICY}): " + choices_help("; "))
    srv.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                     help="any setting of the chosen mode's policy, the value read as JSON where it parses "
                          "(repeatable; e.g. --set sla_window=50000 --set delta=0.1); a restart must give the "
                          "same ones")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    srv.add_argument("--encoder", default=DEFAULT_ENCODER, help=ENCODER_HELP)
    srv.add_argument("--state-dir", default="slarouter-state",
                     help="checkpoint folder, restored on start (default ./slarouter-state)")
    srv.add_argument("--checkpoint-every", type=float, default=30.0, help="seconds between checkpoints (default 30)")
    srv.add_argument("--seed", type=int, default=0)
    srv.add_argument("--instance", default="slr", help="request-id prefix of this replica (default slr)")
    srv.add_argument("--threads", type=int, default=DEFAULT_ENCODER_THREADS,
                     help="torch / ONNX Runtime threads for the encoder (default: 2, or the cores if fewer; one "
                          "request's forward pass then uses both cores of a 2-core machine)")
    srv.add_argument("--api-keys-file", default=None,
                     help="file of accepted API keys, one per line (also: env SLAROUTER_MASTER_KEY)")
    srv.add_argument("--encoder-runtime", default="onnx", choices=["onnx", "torchscript", "eager"],
                     help="per-request encoder forward (default onnx, exported once to the cache; torch if "
                          "ONNX Runtime cannot run it)")
    srv.add_argument("--embed-wait-ms", type=float, default=2.0,
                     help="how long the embedding batch waits for chats on their way (default 2 ms)")
    srv.add_argument("--no-auth", action="store_true", help="serve without API keys (local use only)")
    srv.add_argument("--max-body-bytes", type=int, default=1_000_000,
                     help="largest request body in bytes (default 1,000,000; 413 beyond)")
    srv.set_defaults(func=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DataValidationError, EncoderUnavailableError, ValueError) as exc:
        problems = getattr(exc, "problems", None) or [str(exc)]
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file system refusal is the user's to fix, not a traceback
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
