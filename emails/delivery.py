"""One claimed piece of mail over the wire, once: the rule every sender of the app follows,
the follow-up emails' (emails/sending.py) and the account mail's (emails/outbox.py).

The "default" mailer sends it: over SMTP with RFC 5321's waits (emails/transport.py),
asking the claim just before the end of the data whether the mail is still its to send;
or, in development and tests, the console or memory, where nothing is waited for and
nothing is unknown. A failure before the end of the data is temporary (a 4xx, the network)
or permanent (a 5xx, a configuration that will fail the same way again); once the end
went, only the reply says what became of it, and one that never came leaves the mail
sent-unconfirmed. No database connection or transaction is held while the server is
waited on.
"""

from __future__ import annotations

import email.policy as email_policy
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, mailers
from django.core.mail.backends.smtp import EmailBackend as SmtpBackend

from emails.claims import Claim, claim_body_going
from emails.transport import Envelope, SmtpAbandoned, SmtpFailed, SmtpTimeouts, SmtpUnconfirmed, smtp_deliver
from infra.dbsteps import release_connection

MAILER = "default"


class Outcome(StrEnum):
    # The server answered 250 to the end of the data.
    SENT = "sent"
    # The whole message went, and no reply to its end came: it may have been delivered.
    UNCONFIRMED = "sent, unconfirmed"
    # The claim was handed on before the end went: someone else sends it.
    ABANDONED = "not ours"
    # Refused for now, or the network failed, before the end: a later try may work.
    TEMPORARY = "failed for now"
    # Refused for good, or an address or a configuration no try will fix.
    PERMANENT = "failed"


@dataclass(frozen=True)
class Delivered:
    outcome: Outcome
    # What the server or the network said, for the record; empty when it was sent.
    reason: str = ""


def claimed_mail_deliver(message: EmailMultiAlternatives, claim: Claim, *, clock: Callable[[], datetime]) -> Delivered:
    """Send `message`, which `claim` holds, through the default mailer, and say what came of
    it. Nothing here records it: the caller's ledger does, under the same claim."""
    try:
        _deliver(message, claim, clock)
    except SmtpAbandoned:
        return Delivered(Outcome.ABANDONED)
    except SmtpUnconfirmed as unknown:
        return Delivered(
            Outcome.UNCONFIRMED,
            f"the server took the whole message and gave no reply to its end ({describe_smtp_failure(unknown.error)}): "
            "it may have been delivered, so it is not sent again",
        )
    except SmtpFailed as failure:
        temporary = is_temporary_smtp_failure(failure)
        return Delivered(Outcome.TEMPORARY if temporary else Outcome.PERMANENT, describe_smtp_failure(failure))
    except ValueError as error:
        # An address Django cannot send to: no retry will fix it.
        return Delivered(Outcome.PERMANENT, f"the address was refused before sending: {error}")
    return Delivered(Outcome.SENT)


def _deliver(message: EmailMultiAlternatives, claim: Claim, clock: Callable[[], datetime]) -> None:
    mailer = mailers[MAILER]
    if not isinstance(mailer, SmtpBackend):
        # The console in development, memory in tests: nothing to wait for, nothing unknown.
        mailer.send_messages([message])
        return

    def body_going() -> bool:
        going = claim_body_going(claim, now=clock())
        # The server may take up to ten minutes to answer: no connection is held meanwhile.
        release_connection()
        return going

    envelope = Envelope(
        sender=mailer.prep_address(message.from_email),
        recipients=[mailer.prep_address(address) for address in message.recipients()],
        message=message.message(policy=email_policy.SMTP).as_bytes(),
    )
    release_connection()
    smtp_deliver(mailer=mailer, envelope=envelope, timeouts=SmtpTimeouts.from_settings(), before_end_of_data=body_going)


def is_temporary_smtp_failure(error: Exception) -> bool:
    """Whether trying again later may succeed: a 4xx reply, a dropped or refused connection,
    a timeout. A 5xx reply is the server's final word."""
    if isinstance(error, SmtpFailed):
        return is_temporary_smtp_failure(error.error)
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in error.recipients.values())
    if isinstance(error, smtplib.SMTPResponseException):
        return 400 <= error.smtp_code < 500
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return True
    if isinstance(error, ssl.SSLError):
        # A handshake that failed (a plain port, a certificate for another name) fails
        # the same way next time: it is the configuration, not the network.
        return False
    # smtplib's other errors (no STARTTLS, say) are about this server's configuration;
    # what remains is the network: refused, reset, timed out.
    return not isinstance(error, smtplib.SMTPException) and isinstance(error, OSError)


def describe_smtp_failure(error: Exception) -> str:
    if isinstance(error, SmtpFailed):
        # A reply says what it was about; a timeout or a reset says nothing of where.
        said = describe_smtp_failure(error.error)
        replied = isinstance(error.error, smtplib.SMTPResponseException | smtplib.SMTPRecipientsRefused)
        return said if replied else f"{said} ({error.phase})"
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        refusals = "; ".join(f"{code} {_text(message)}" for code, message in error.recipients.values())
        return f"SMTP refused the recipient: {refusals}"
    if isinstance(error, smtplib.SMTPResponseException):
        return f"SMTP {error.smtp_code}: {_text(error.smtp_error)}"
    if isinstance(error, smtplib.SMTPNotSupportedError) and "STARTTLS" in str(error):
        return (
            f"the mail server at {_mail_server()} does not offer TLS, and EMAIL_USE_TLS is true: "
            "set EMAIL_USE_TLS=false for a server without TLS (a local mail catcher), or use one that has it"
        )
    if isinstance(error, ssl.SSLError):
        return (
            f"TLS with the mail server at {_mail_server()} failed ({error.reason or error}): "
            "check EMAIL_PORT (587 for STARTTLS) and that the server's certificate is for EMAIL_HOST"
        )
    return f"{type(error).__name__}: {error}"


def _mail_server() -> str:
    options = settings.MAILERS.get("default", {}).get("OPTIONS", {})
    return f"{options.get('host', '?')}:{options.get('port', '?')}"


def _text(message: bytes | str) -> str:
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
