"""The old short URL ``/experiments``: forwards to ``/experiments_page`` with the link's settings."""

from pages._frame import forward_old_url

forward_old_url(__file__)
