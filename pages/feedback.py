"""The old short URL ``/feedback``: forwards to ``/feedback_by_hand`` with the link's settings."""

from pages._frame import forward_old_url

forward_old_url(__file__)
