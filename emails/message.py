"""The email as it goes over the wire.

Python's email package folds any header line over 78 characters, and a single token
longer than that (the unsubscribe URL in `<...>`, always, at a production length) comes out
RFC 2047-encoded: `List-Unsubscribe: =?utf-8?q?=3Chttps=3A//...?=`. Gmail and Yahoo then
find no unsubscribe link, which their bulk-sender rules require. RFC 5322's hard limit is
998 characters a line, so headers are generated up to that, unfolded and unencoded.
"""

from __future__ import annotations

import email.policy
from email.message import EmailMessage as MimeMessage
from email.message import Message
from email.policy import Policy

from django.core.mail import EmailMultiAlternatives

LONGEST_LINE = 998


class UnfoldedEmail(EmailMultiAlternatives):
    """An email whose header lines are kept whole up to RFC 5322's limit, whichever
    policy the mail backend asks for (SMTP's, with CRLF, or the console's)."""

    def message(self, *, policy: Policy[Message[str, str]] | None = email.policy.default) -> MimeMessage:
        # None is the default policy, as for Python's EmailMessage.
        return super().message(policy=(policy or email.policy.default).clone(max_line_length=LONGEST_LINE))
