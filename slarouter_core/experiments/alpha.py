"""Alpha, the SLA level: a number or a named rule resolved per benchmark, and the rule
that decides whether a method "meets alpha" over several seeds."""

from __future__ import annotations

import math

from ..data import RoutingData, midpoint_alpha, paper_alpha
from ..validation import check_alpha


#: named alpha rules: halfway between the two most expensive models' accuracy, or the
#: paper's "1 point below the medium (second most expensive) model"
ALPHA_RULES = {"midpoint": midpoint_alpha, "paper": paper_alpha}
#: "meets alpha": whole-stream satisfaction >= alpha in at least this share of the seeds
#: (18 of 20); a mean over 3 seeds is met by the static mixture about half the time
MEET_SHARE = 0.9


def resolve_alpha(alpha: float | str, data: RoutingData | None) -> float:
    """A number in (0, 1) (also as text, from a command line or URL), or a rule of
    :data:`ALPHA_RULES` ('midpoint', 'paper'), checked by :func:`validation.check_alpha` so
    that a bad alpha reads the same wherever it is given.

    ``data`` None only validates: a valid rule name then gives 0.5 as a stand-in."""
    if isinstance(alpha, str):
        if alpha in ALPHA_RULES:
            return 0.5 if data is None else ALPHA_RULES[alpha](data)
        try:
            alpha = float(alpha)
        except ValueError:
            pass  # not a number: check_alpha names the text
    try:
        return check_alpha(alpha)
    except ValueError as exc:
        rules = "', '".join(ALPHA_RULES)
        raise ValueError(f"{exc} (or a rule: '{rules}')") from None


def seeds_needed(n_seeds: int) -> int:
    """Seeds that must meet alpha for a method to 'meet alpha' (18 of 20, 3 of 3)."""
    return int(math.ceil(MEET_SHARE * n_seeds - 1e-9))
