"""Writing the communication tier: planning emails, sending each exactly once, the
person's preferences and their one-click unsubscribe. Other apps ask here rather than
write these tables.

Planning inserts ledger rows for everyone due at once (one statement; the unique key
(user, kind, period) turns a repeated tick into a no-op) and hands only the new rows to
workers once the insert is committed. Sending drafts with the model outside any
transaction, claims the row with a conditional UPDATE, reads the preferences again, and
only then talks SMTP.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, make_msgid
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import User
from coach import llm
from coach.conversation import prompt
from coach.llm import LLMError
from coach.models import ChatSession
from emails.drafting import RepetitiveDraft, draft_email
from emails.models import Email, EmailPreference
from emails.schedule import SendingHours, SendingWindow, may_email_at, next_sending_time
from emails.selectors import (
    check_in_plan,
    email_for_sending,
    email_preference_of,
    episode_plan,
    nudge_plan,
    sessions_of_week,
)
from emails.unsubscribe import unsubscribe_url
from memory.models import Memory, ProspectiveStatus
from memory.services import prospective_memory_raise, weekly_episode_save

logger = logging.getLogger(__name__)

MAILER = "default"
# Most emails the dispatcher hands out in one tick; the rest wait a minute for the next.
DISPATCH_BATCH = 5000
# Emails handed to workers one task each; a larger plan goes in batches (_hand_to_workers).
HAND_OUT_BATCH = 500
Status = Email.Status
Kind = Email.Kind


class EmailTemporaryFailure(Exception):
    """Sending may work later: an SMTP 4xx, a dropped connection, a model outage."""


class SendOutcome(StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"
    FAILED = "failed"
    # Kept back until the person's next sending time; the dispatcher sends it then.
    DEFERRED = "deferred"
    # Another task has it, or had it: sent, claimed, or gone.
    NOT_OURS = "not ours"


def sending_window() -> SendingWindow:
    return SendingWindow(settings.EMAIL_SENDING_WINDOW_START, settings.EMAIL_SENDING_WINDOW_END)


# Preferences --------------------------------------------------------------------------


def email_preference_update(
    *,
    user: User,
    frequency: str,
    session_summaries: bool,
    quiet_start: time,
    quiet_end: time,
    time_zone: str,
) -> EmailPreference:
    """Save how often and when the coach may email the person; the row is made on first save.
    It does not undo an unsubscribe: only the person's explicit consent would."""
    preference, _ = EmailPreference.objects.update_or_create(
        user=user,
        defaults={
            "frequency": frequency,
            "session_summaries": session_summaries,
            "quiet_start": quiet_start,
            "quiet_end": quiet_end,
            "time_zone": time_zone,
        },
    )
    return preference


def email_time_zone_set(*, user: User, time_zone: str) -> bool:
    """Use the browser's time zone for quiet hours; ignored unless it is a real zone name."""
    if time_zone not in available_timezones():
        return False
    EmailPreference.objects.update_or_create(user=user, defaults={"time_zone": time_zone})
    return True


def email_unsubscribe(*, user_id: int, now: datetime | None = None) -> bool:
    """Stop every email the coach would send the person, at once. Idempotent: the first
    unsubscribe's time is kept. Returns whether this call changed anything.

    Emails already planned are skipped here; one being sent right now is stopped by the
    send task, which reads the preferences again after claiming it."""
    now = now or timezone.now()
    if not User.objects.filter(pk=user_id).exists():
        return False
    with transaction.atomic():
        preference, _ = EmailPreference.objects.get_or_create(user_id=user_id)
        changed = EmailPreference.objects.filter(pk=preference.pk, unsubscribed_at__isnull=True).update(
            unsubscribed_at=now
        )
        Email.objects.filter(user_id=user_id, status=Status.QUEUED).update(
            status=Status.SKIPPED, error="they unsubscribed before it was sent"
        )
    return changed == 1


def email_resubscribe(*, user: User) -> bool:
    """Let the coach write again after an unsubscribe. Returns whether anything changed;
    emails skipped meanwhile stay skipped (their moment has passed)."""
    return EmailPreference.objects.filter(user=user, unsubscribed_at__isnull=False).update(unsubscribed_at=None) == 1


# Planning -----------------------------------------------------------------------------


def check_ins_plan(*, now: datetime | None = None) -> int:
    """Plan a check-in for everyone with an intention coming up within the lead window
    (one a person at most, the soonest), and send them. Returns how many were planned."""
    now = now or timezone.now()
    plan = check_in_plan(now=now, window=sending_window(), lead=timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS))
    # The period is the memory: one check-in per intention, however often this runs.
    return _insert_and_send(
        f"""WITH {plan.ctes}
        INSERT INTO emails_email ({_PLANNED_COLUMNS}, memory_id)
        SELECT user_id, %(kind)s, 'memory-' || memory_id, {_PLANNED_VALUES}, memory_id FROM {plan.due}
        ON CONFLICT ON CONSTRAINT email_once_per_user_kind_period DO NOTHING
        RETURNING id""",  # noqa: S608 - built from constants; every value is a parameter
        plan.parameters | _planned_parameters(kind=Kind.CHECK_IN, now=now),
    )


def nudges_plan(*, now: datetime | None = None) -> int:
    """Plan a nudge for everyone due one now, whatever their number, in a bounded number
    of queries, and send them. Returns how many were planned."""
    now = now or timezone.now()
    plan = nudge_plan(now=now, window=sending_window())
    return _insert_and_send(
        f"""WITH {plan.ctes}
        INSERT INTO emails_email ({_PLANNED_COLUMNS})
        SELECT user_id, %(kind)s, period_key, {_PLANNED_VALUES} FROM {plan.due}
        ON CONFLICT ON CONSTRAINT email_once_per_user_kind_period DO NOTHING
        RETURNING id""",  # noqa: S608 - built from constants; every value is a parameter
        plan.parameters | _planned_parameters(kind=Kind.NUDGE, now=now),
    )


def session_recap_plan(*, session_id: int, now: datetime | None = None) -> Email | None:
    """After a session is summarised: its recap email, if the person asked for recaps.
    Sent at once, or kept for their next sending time when it is too late or too early."""
    now = now or timezone.now()
    session = ChatSession.objects.select_related("user").filter(pk=session_id).first()
    if session is None or not session.summary.strip():
        return None
    preference = email_preference_of(user=session.user)
    if not preference.session_summaries or preference.unsubscribed_at is not None:
        return None
    send_at = next_sending_time(now, _hours(preference), sending_window())
    if send_at is None:
        return None
    send_now = send_at == now
    try:
        with transaction.atomic():
            email = Email.objects.create(
                user=session.user,
                kind=Kind.SESSION_SUMMARY,
                period_key=f"session-{session_id}",
                session=session,
                send_after=_lease_from(now) if send_now else send_at,
                created_at=now,
            )
            if send_now:
                _send_on_commit([email.pk])
    except IntegrityError:
        # Planned already (the summary was written twice): that one stands.
        return None
    return email


def emails_dispatch_due(*, now: datetime | None = None) -> int:
    """Hand to workers the queued emails whose time has come: kept back by quiet hours,
    or whose task was lost. Returns how many.

    A claim older than EMAIL_CLAIM_STALE_SECONDS belongs to a worker that died between
    claiming and recording the result: the email is queued again (see email_send for
    why that is worth the rare duplicate)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    with transaction.atomic():
        Email.objects.filter(status=Status.SENDING, claimed_at__lt=stale).update(
            status=Status.QUEUED, claimed_at=None, send_after=now
        )
        with connection.cursor() as cursor:
            # Each row handed out gets a new lease, so a second dispatcher (or the next
            # tick) leaves it alone while its task waits in the queue; SKIP LOCKED lets
            # two dispatchers split the work instead of queueing behind each other.
            cursor.execute(
                """UPDATE emails_email SET send_after = %(lease)s
                WHERE id IN (
                    SELECT id FROM emails_email
                    WHERE status = %(queued)s AND send_after <= %(now)s
                    ORDER BY send_after
                    LIMIT %(batch)s
                    FOR UPDATE SKIP LOCKED
                )
                RETURNING id""",
                {"lease": _lease_from(now), "queued": Status.QUEUED, "now": now, "batch": DISPATCH_BATCH},
            )
            due = [row[0] for row in cursor.fetchall()]
        _send_on_commit(due)
    return len(due)


def weekly_episodes_plan(*, now: datetime | None = None) -> int:
    """Ask for the weekly episode of everyone whose Sunday evening it is. Returns how many."""
    from emails.tasks import write_weekly_episode

    now = now or timezone.now()
    due = episode_plan(now=now).select("user_id, week_key")
    for user_id, week_key in due:
        write_weekly_episode.delay(user_id, week_key)
    return len(due)


def emails_hand_out(*, email_ids: list[int]) -> int:
    """One send task per email of a planned batch (see _hand_to_workers)."""
    from emails.tasks import send_email

    for email_id in email_ids:
        send_email.delay(email_id)
    return len(email_ids)


_PLANNED_COLUMNS = (
    "user_id, kind, period_key, status, send_after, attempts, error, embedding_model, provider_message_id, "
    "created_at, updated_at"
)
_PLANNED_VALUES = "%(queued)s, %(lease)s, 0, '', '', '', %(now)s, %(now)s"


def _planned_parameters(*, kind: str, now: datetime) -> dict[str, object]:
    # Planned rows are sent at once: the lease keeps the dispatcher off them meanwhile.
    return {"kind": kind, "queued": Status.QUEUED, "lease": _lease_from(now), "now": now}


def _insert_and_send(sql: str, parameters: dict[str, object]) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, parameters)
        planned = [row[0] for row in cursor.fetchall()]
        # Only the rows this statement created: a conflict (planned before) returns none.
        _send_on_commit(planned)
    return len(planned)


def _send_on_commit(email_ids: list[int]) -> None:
    # A worker must never look for a row that is not committed yet.
    if email_ids:
        transaction.on_commit(lambda: _hand_to_workers(email_ids))


def _hand_to_workers(email_ids: list[int]) -> None:
    """Publish the emails' send tasks: up to HAND_OUT_BATCH one task each; beyond, one task
    per batch, which a worker fans out into one send task per email.

    Publishing a task to Redis costs about half a millisecond, so a plan of 30,000 emails
    published one by one would hold its tick for 15 seconds; in batches, the work is
    shared by every worker there is, in parallel."""
    from emails.tasks import hand_out_emails, send_email

    if len(email_ids) <= HAND_OUT_BATCH:
        for email_id in email_ids:
            send_email.delay(email_id)
        return
    for start in range(0, len(email_ids), HAND_OUT_BATCH):
        hand_out_emails.delay(email_ids[start : start + HAND_OUT_BATCH])


def _lease_from(now: datetime) -> datetime:
    # A task still in the queue after a visibility timeout was lost (Redis would have
    # handed an unacknowledged one to another worker by then): only then is it resent.
    return now + timedelta(seconds=settings.CELERY_VISIBILITY_TIMEOUT_SECONDS)


def _hours(preference: EmailPreference) -> SendingHours:
    return SendingHours(
        time_zone=preference.time_zone, quiet_start=preference.quiet_start, quiet_end=preference.quiet_end
    )


# Sending --------------------------------------------------------------------------------


def email_send(*, email_id: int, now: datetime | None = None) -> SendOutcome:
    """Send one planned email, once, however many tasks try at the same time.

    1. Reads the row and the person's preferences: an email they no longer want is
       skipped; one outside their sending hours waits for the next (DEFERRED).
    2. Has the model draft it (no transaction is open), unless a first try did already.
    3. Claims it: UPDATE ... WHERE status = queued. Zero rows means another task has it.
    4. Reads the preferences again: an unsubscribe while the model wrote still counts.
    5. Sends over SMTP, then records it sent (and a check-in's intention raised).

    Raises EmailTemporaryFailure when a later try may succeed; the row is queued again.
    A redelivered task may take over a claim older than EMAIL_CLAIM_STALE_SECONDS: the
    worker that made it died. If it died after the SMTP server accepted the email but
    before recording it, the email goes out twice (with the same Message-ID); refusing
    would drop every email whose worker died before sending. A window of milliseconds
    against a lost email: we take the duplicate.
    """
    now = now or timezone.now()
    email = email_for_sending(email_id=email_id)
    if email is None or not _claimable(email, now):
        return SendOutcome.NOT_OURS
    if email.status == Status.QUEUED:
        if held := _hold_back(email, now, status=Status.QUEUED):
            return held
        if email.subject is None:
            drafted = _draft(email, now)
            if isinstance(drafted, SendOutcome):
                return drafted
            email = drafted
    message_id = email.provider_message_id or make_msgid(domain=urlsplit(settings.SITE_URL).hostname)
    if not _claim(email, message_id=message_id, now=now):
        return SendOutcome.NOT_OURS
    email = email_for_sending(email_id=email_id)
    assert email is not None, "a claimed email cannot vanish: erasing the account takes its rows in one transaction"
    if held := _hold_back(email, now, status=Status.SENDING):
        return held
    try:
        _deliver(email, message_id=message_id)
    except (smtplib.SMTPException, OSError) as error:
        reason = describe_smtp_failure(error)
        if is_temporary_smtp_failure(error):
            _release(email, now=now, error=reason, claimed=True)
            raise EmailTemporaryFailure(reason) from error
        _finish(email, Status.SENDING, Status.FAILED, reason)
        return SendOutcome.FAILED
    except ValueError as error:
        # An address Django cannot send to: no retry will fix it.
        _finish(email, Status.SENDING, Status.FAILED, f"the address was refused before sending: {error}")
        return SendOutcome.FAILED
    _record_sent(email, now=now)
    return SendOutcome.SENT


def email_give_up(*, email_id: int, error: str) -> None:
    """The last retry failed too: record it failed, with the error, so it is not lost."""
    Email.objects.filter(pk=email_id, status=Status.QUEUED).update(
        status=Status.FAILED, error=f"gave up after {settings.EMAIL_SEND_MAX_RETRIES} retries: {error}"
    )


def is_temporary_smtp_failure(error: Exception) -> bool:
    """Whether trying again later may succeed: a 4xx reply, a dropped or refused connection,
    a timeout. A 5xx reply is the server's final word."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in error.recipients.values())
    if isinstance(error, smtplib.SMTPResponseException):
        return 400 <= error.smtp_code < 500
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return True
    # smtplib's other errors (no STARTTLS, say) are about this server's configuration;
    # what remains is the network: refused, reset, timed out.
    return not isinstance(error, smtplib.SMTPException) and isinstance(error, OSError)


def describe_smtp_failure(error: Exception) -> str:
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        refusals = "; ".join(f"{code} {_text(message)}" for code, message in error.recipients.values())
        return f"SMTP refused the recipient: {refusals}"
    if isinstance(error, smtplib.SMTPResponseException):
        return f"SMTP {error.smtp_code}: {_text(error.smtp_error)}"
    return f"{type(error).__name__}: {error}"


def _claimable(email: Email, now: datetime) -> bool:
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    if email.status == Status.QUEUED:
        return True
    return email.status == Status.SENDING and email.claimed_at is not None and email.claimed_at < stale


def _hold_back(email: Email, now: datetime, *, status: str) -> SendOutcome | None:
    """Skip an email the person no longer wants; keep one back outside their hours."""
    preference = email_preference_of(user=email.user)
    if reason := _unwanted_because(email, preference):
        _finish(email, status, Status.SKIPPED, reason)
        return SendOutcome.SKIPPED
    hours = _hours(preference)
    if may_email_at(now, hours, sending_window()):
        return None
    send_at = next_sending_time(now, hours, sending_window())
    if send_at is None:
        _finish(email, status, Status.SKIPPED, "their quiet hours cover the whole sending window")
        return SendOutcome.SKIPPED
    Email.objects.filter(pk=email.pk, status=status).update(status=Status.QUEUED, claimed_at=None, send_after=send_at)
    return SendOutcome.DEFERRED


def _unwanted_because(email: Email, preference: EmailPreference) -> str | None:
    if preference.unsubscribed_at is not None:
        return "they unsubscribed"
    if not email.user.is_active:
        return "the account is deactivated"
    if email.kind in (Kind.NUDGE, Kind.CHECK_IN) and preference.frequency == EmailPreference.Frequency.OFF:
        return "they turned the coach's emails off"
    if email.kind == Kind.SESSION_SUMMARY and not preference.session_summaries:
        return "they no longer want session recaps"
    if email.kind == Kind.CHECK_IN and (email.memory is None or email.memory.status != ProspectiveStatus.OPEN):
        return "the intention was closed or deleted before the check-in went out"
    return None


def _draft(email: Email, now: datetime) -> Email | SendOutcome:
    """The email with its draft saved, or what became of it instead."""
    try:
        written = draft_email(email=email, now=now)
    except LLMError as error:
        if error.retryable:
            _release(email, now=now, error=f"the model could not write it yet: {error}", claimed=False)
            raise EmailTemporaryFailure(str(error)) from error
        _finish(email, Status.QUEUED, Status.FAILED, f"the model could not write it: {error}")
        return SendOutcome.FAILED
    if isinstance(written, RepetitiveDraft):
        # Kept for the record (the admin can see what was not sent, and why).
        Email.objects.filter(pk=email.pk, status=Status.QUEUED, subject__isnull=True).update(
            status=Status.SKIPPED,
            error=written.reason,
            subject=written.draft.subject,
            body_text=written.draft.body,
        )
        return SendOutcome.SKIPPED
    # Conditional, like the claim: when two deliveries of the task draft at once, the
    # first draft saved is the one sent; the other is dropped here.
    Email.objects.filter(pk=email.pk, status=Status.QUEUED, subject__isnull=True).update(
        subject=written.subject,
        body_text=written.body_text,
        body_html=written.body_html,
        embedding=written.embedding.vector,
        embedding_model=written.embedding.model,
    )
    current = email_for_sending(email_id=email.pk)
    return current if current is not None and current.status == Status.QUEUED else SendOutcome.NOT_OURS


def _claim(email: Email, *, message_id: str, now: datetime) -> bool:
    # The only way into `sending`: one conditional UPDATE, so of any number of tasks
    # racing for the row, exactly one sees a row updated.
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    claimed = (
        Email.objects.filter(pk=email.pk, subject__isnull=False)
        .filter(Q(status=Status.QUEUED) | Q(status=Status.SENDING, claimed_at__lt=stale))
        .update(status=Status.SENDING, claimed_at=now, attempts=F("attempts") + 1, provider_message_id=message_id)
    )
    return claimed == 1


def _deliver(email: Email, *, message_id: str) -> None:
    link = unsubscribe_url(email.user_id)
    message = EmailMultiAlternatives(
        subject=email.subject or "",
        body=email.body_text or "",
        to=[email.user.email],
        headers={
            "Message-ID": message_id,
            # RFC 8058: mail clients show an unsubscribe button that POSTs here, no cookies.
            "List-Unsubscribe": f"<{link}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    )
    if email.body_html:
        message.attach_alternative(email.body_html, "text/html")
    message.send(using=MAILER)


def _release(email: Email, *, now: datetime, error: str, claimed: bool) -> None:
    """Give the row back for a retry: queued, with the error, and a lease so the
    dispatcher leaves it to the task's own retry. A claim is released only if it is ours."""
    rows = Email.objects.filter(pk=email.pk)
    rows = rows.filter(status=Status.SENDING, claimed_at=now) if claimed else rows.filter(status=Status.QUEUED)
    rows.update(status=Status.QUEUED, claimed_at=None, error=error, send_after=_lease_from(now))


def _record_sent(email: Email, *, now: datetime) -> None:
    with transaction.atomic():
        # It went out: recorded whoever holds the row now (a dispatcher may have queued it
        # again after a very slow send), so nobody sends it a second time.
        recorded = Email.objects.filter(pk=email.pk, status__in=[Status.SENDING, Status.QUEUED]).update(
            status=Status.SENT, sent_at=now, error=""
        )
        if not recorded:
            logger.warning("email %s went out, but another task had already finished it", email.pk)
        if recorded and email.kind == Kind.CHECK_IN and email.memory_id is not None:
            prospective_memory_raise(
                user=email.user, memory_id=email.memory_id, reason="asked about it in a check-in email", now=now
            )


def _finish(email: Email, status: str, outcome: str, reason: str) -> None:
    Email.objects.filter(pk=email.pk, status=status).update(status=outcome, error=reason, claimed_at=None)
    if outcome == Status.FAILED:
        logger.warning("email %s failed: %s", email.pk, reason)


def _text(message: bytes | str) -> str:
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


# Weekly episodes --------------------------------------------------------------------------


def weekly_episode_write(*, user_id: int, week_key: str, now: datetime | None = None) -> Memory | None:
    """Have the model summarise the person's week from its session summaries, and keep it
    as their weekly episode (the eviction policy keeps the newest MEMORY_MAX_EPISODES).
    None when there is nothing to write, or it is written already."""
    now = now or timezone.now()
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or Memory.objects.filter(user=user, key=week_key).exists():
        return None
    zone = ZoneInfo(email_preference_of(user=user).time_zone)
    _, year, week = week_key.split("-")
    start = datetime.combine(date.fromisocalendar(int(year), int(week), 1), time(0), tzinfo=zone)
    sessions = sessions_of_week(user=user, start=start, end=start + timedelta(days=7))
    if not sessions:
        return None
    lines = [
        f"- {session.last_message_at.astimezone(zone):%A %Y-%m-%d}: {' '.join(session.summary.split())}"
        for session in sessions
    ]
    text = llm.complete(
        [
            {"role": "system", "content": prompt("weekly_episode")},
            {"role": "user", "content": f"The sessions of week {year}-{week}:\n" + "\n".join(lines)},
        ]
    )
    return weekly_episode_save(user=user, key=week_key, text=text, now=now)
