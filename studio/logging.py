"""Log records as an operator wants to read them.

Django logs every refused request (403, 404, 400) through ``django.request`` /
``django.security`` with the exception attached, so a denied page view printed a whole
traceback. A refusal is the system working, not failing: it is one line. Server errors (5xx)
keep their traceback.
"""

from __future__ import annotations

import logging


class ClientErrorsOneLine(logging.Filter):
    """Drop the traceback of records about responses with a 4xx status (the line stays)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
