"""The uniformly random router: the floor any learned router must clear."""

from __future__ import annotations

import numpy as np

from ..data import RoutingData
from ..feedback import FeedbackConfig
from .common import TAG_RANDOM, History, MethodResult, check_alpha, common_stream, method_result, tagged_rng


def random_router(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                  feedback_rate: float, *, history: History | None = None,
                  feedback: FeedbackConfig | None = None) -> MethodResult:
    """Uniform over models, seeded with ``(seed, 1)``."""
    alpha = check_alpha(alpha)
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    model = tagged_rng(seed, TAG_RANDOM).integers(0, data.n_models, data.n_requests)
    return method_result("random", data, alpha, order, model)
