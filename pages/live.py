"""The old short URL ``/live``: forwards to ``/live_run`` with the link's settings."""

from pages._frame import forward_old_url

forward_old_url(__file__)
