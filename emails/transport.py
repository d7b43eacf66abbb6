"""One email over SMTP, with RFC 5321's timeouts, knowing how far it got.

Django's SMTP backend waits the same `timeout` for every reply, and when it raises, its
caller cannot tell an email the server never took from one whose end it took without
answering in time. RFC 5321 section 4.5.3.2 says how long a client waits: 5 minutes for
the greeting, MAIL and RCPT (and here EHLO, STARTTLS and AUTH too), 2 minutes for DATA's
354, 3 minutes for each block of data, 10 minutes for the reply to the final ".".

Before that "." nothing can have been delivered (a server discards a transaction it did
not see end), so a failure there is plain: refused for now, refused for good, or the
network. Once it is sent, only the reply says what became of the email: a timeout or a
dropped connection leaves it unknown, since the server may already have queued it
(SmtpUnconfirmed). The caller is asked just before the "." whether the email is still
its to send, and may take it back (SmtpAbandoned).
"""

from __future__ import annotations

import contextlib
import re
import smtplib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import partial

from django.conf import settings
from django.core.mail.backends.smtp import EmailBackend
from django.core.mail.utils import DNS_NAME

CRLF = b"\r\n"
# What one TCP send hands the server: the unit RFC 5321's data-block timeout is counted in.
BLOCK_BYTES = 64 * 1024
# QUIT comes after the outcome is known: worth saying, never worth waiting minutes for.
QUIT_SECONDS = 5.0
_LINE_ENDS = re.compile(rb"\r\n|\r(?!\n)|(?<!\r)\n")
_LEADING_DOT = re.compile(rb"(?m)^\.")


@dataclass(frozen=True)
class SmtpTimeouts:
    """How long to wait for each reply (seconds), after RFC 5321 section 4.5.3.2."""

    command: float
    data_initiation: float
    data_block: float
    data_termination: float

    @classmethod
    def from_settings(cls) -> SmtpTimeouts:
        return cls(
            command=settings.EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS,
            data_initiation=settings.EMAIL_SMTP_DATA_TIMEOUT_SECONDS,
            data_block=settings.EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS,
            data_termination=settings.EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS,
        )


@dataclass(frozen=True)
class Envelope:
    sender: str
    recipients: list[str]
    message: bytes


class Phase(StrEnum):
    GREETING = "while connecting or waiting for the greeting"
    HELLO = "at EHLO"
    STARTTLS = "at STARTTLS"
    LOGIN = "at AUTH"
    MAIL = "at MAIL FROM"
    RCPT = "at RCPT TO"
    DATA = "at DATA"
    BODY = "while sending the message"
    END_OF_DATA = "waiting for the reply to the end of the message"


class SmtpFailed(Exception):
    """The email was not delivered: the server refused it, or the exchange broke off
    before the end of its data. `error` is what smtplib or the network raised."""

    def __init__(self, phase: Phase, error: Exception) -> None:
        super().__init__(f"{error} ({phase})")
        self.phase = phase
        self.error = error


class SmtpUnconfirmed(Exception):
    """The whole email went to the server, and no reply to its end came in time: it may
    have been delivered. `error` is the timeout or the dropped connection."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class SmtpAbandoned(Exception):
    """The caller took the email back before its end of data: nothing was delivered."""


def smtp_deliver(
    *,
    mailer: EmailBackend,
    envelope: Envelope,
    timeouts: SmtpTimeouts,
    before_end_of_data: Callable[[], bool],
) -> None:
    """Send `envelope` through the server `mailer` names (its host, port, TLS and login),
    waiting for each reply as long as `timeouts` says. Returns once the server answered
    250 to the end of the data; raises SmtpFailed, SmtpUnconfirmed or SmtpAbandoned."""
    session = _Session(mailer, timeouts)
    try:
        session.open()
        session.address(envelope)
        session.data(envelope.message, before_end_of_data)
    finally:
        session.close()


class _Session:
    def __init__(self, mailer: EmailBackend, timeouts: SmtpTimeouts) -> None:
        self.mailer = mailer
        self.timeouts = timeouts
        # No host yet: connecting is a step of its own, with its own timeout.
        self.smtp: smtplib.SMTP
        if mailer.use_ssl:
            self.smtp = smtplib.SMTP_SSL(
                local_hostname=DNS_NAME.get_fqdn(), timeout=timeouts.command, context=mailer.ssl_context
            )
        else:
            self.smtp = smtplib.SMTP(local_hostname=DNS_NAME.get_fqdn(), timeout=timeouts.command)
        self.delivered = False

    def open(self) -> None:
        code, reply = self._step(Phase.GREETING, self.timeouts.command, self._connect)
        if code != 220:
            raise SmtpFailed(Phase.GREETING, smtplib.SMTPConnectError(code, reply))
        self._step(Phase.HELLO, self.timeouts.command, self.smtp.ehlo_or_helo_if_needed)
        if self.mailer.use_tls and not self.mailer.use_ssl:
            self._step(
                Phase.STARTTLS, self.timeouts.command, lambda: self.smtp.starttls(context=self.mailer.ssl_context)
            )
            # After STARTTLS the server forgets the EHLO: say it again over TLS.
            self._step(Phase.HELLO, self.timeouts.command, self.smtp.ehlo)
        if self.mailer.username and self.mailer.password:
            self._step(
                Phase.LOGIN, self.timeouts.command, lambda: self.smtp.login(self.mailer.username, self.mailer.password)
            )

    def address(self, envelope: Envelope) -> None:
        options = [f"size={len(envelope.message)}"] if self.smtp.does_esmtp and self.smtp.has_extn("size") else []
        code, reply = self._step(Phase.MAIL, self.timeouts.command, lambda: self.smtp.mail(envelope.sender, options))
        if code != 250:
            raise SmtpFailed(Phase.MAIL, smtplib.SMTPSenderRefused(code, reply, envelope.sender))
        refused = {}
        for recipient in envelope.recipients:
            code, reply = self._step(Phase.RCPT, self.timeouts.command, partial(self.smtp.rcpt, recipient))
            if code not in (250, 251):
                refused[recipient] = (code, reply)
        if len(refused) == len(envelope.recipients):
            raise SmtpFailed(Phase.RCPT, smtplib.SMTPRecipientsRefused(refused))

    def data(self, message: bytes, before_end_of_data: Callable[[], bool]) -> None:
        code, reply = self._step(Phase.DATA, self.timeouts.data_initiation, self._data_command)
        if code != 354:
            raise SmtpFailed(Phase.DATA, smtplib.SMTPDataError(code, reply))
        payload = _LEADING_DOT.sub(b"..", _LINE_ENDS.sub(CRLF, message))
        if not payload.endswith(CRLF):
            payload += CRLF
        for start in range(0, len(payload), BLOCK_BYTES):
            block = payload[start : start + BLOCK_BYTES]
            self._step(Phase.BODY, self.timeouts.data_block, partial(self._send, block))
        if not before_end_of_data():
            # The connection closes without the final ".": the server drops the message.
            raise SmtpAbandoned
        code, reply = self._end_of_data()
        if code != 250:
            # An answer, though not the one hoped for: the server did not take it.
            raise SmtpFailed(Phase.END_OF_DATA, smtplib.SMTPDataError(code, reply))
        self.delivered = True

    def close(self) -> None:
        if self.delivered:
            self._timeout(QUIT_SECONDS)
            with contextlib.suppress(smtplib.SMTPException, OSError):
                self.smtp.quit()
        self.smtp.close()

    def _end_of_data(self) -> tuple[int, bytes]:
        try:
            self._timeout(self.timeouts.data_block)
            self._send(b"." + CRLF)
            self._timeout(self.timeouts.data_termination)
            return self.smtp.getreply()
        except (smtplib.SMTPServerDisconnected, OSError) as error:
            # smtplib reports a reply that timed out as a disconnection: either way the
            # server had the whole message, and said nothing about it.
            raise SmtpUnconfirmed(error) from error

    def _connect(self) -> tuple[int, bytes]:
        return self.smtp.connect(self.mailer.host, self.mailer.port)

    def _data_command(self) -> tuple[int, bytes]:
        self.smtp.putcmd("data")
        return self.smtp.getreply()

    def _send(self, data: bytes) -> None:
        if self.smtp.sock is None:
            raise smtplib.SMTPServerDisconnected("the connection is closed")
        self.smtp.sock.sendall(data)

    def _step[R](self, phase: Phase, timeout: float, action: Callable[[], R]) -> R:
        self._timeout(timeout)
        try:
            return action()
        except (smtplib.SMTPException, OSError) as error:
            raise SmtpFailed(phase, error) from error

    def _timeout(self, seconds: float) -> None:
        # Each wait has its own limit, so the socket's is set before each step.
        self.smtp.timeout = seconds
        if self.smtp.sock is not None:
            self.smtp.sock.settimeout(seconds)
