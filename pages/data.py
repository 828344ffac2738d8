"""The old short URL ``/data``: forwards to ``/data_page`` with the link's settings."""

from pages._frame import forward_old_url

forward_old_url(__file__)
