"""``while_mounted``: a widget method that the app calls from messages and timers, which can still
fire while the app shuts down (the widget's children already gone): dropped then instead of failing
the app on its way out."""

from __future__ import annotations

import functools

from textual.css.query import NoMatches


def while_mounted(method):
    """Run ``method`` only while the widget is mounted; a child already removed ends it quietly."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self.is_mounted:
            return None
        try:
            return method(self, *args, **kwargs)
        except NoMatches:
            return None

    return wrapper
