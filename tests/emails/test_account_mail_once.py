"""Account mail (a password reset here) sent by the rule every mail follows, against real
worker and beat processes and an SMTP server of the tests' own:

- a server that answers the end of the message 15 s late (past Django's 10 s wait, well
  inside RFC 5321's 10 minutes) gets it once, with one connection, never again;
- a worker killed while it waited for that reply leaves the reset sent-unconfirmed, its
  text erased, never sent again; one killed before the end went leaves it to a live
  worker, which sends it once;
- a second reset the person asks for is a second mail, and arrives.

Each arrives with the Message-ID it was queued with, on every try.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from accounts.models import User
from emails.models import OutgoingMail
from tests.emails.scripted_smtp import Script, ScriptedSmtpServer
from tests.emails.workers import beat_process, kill_whole, wait_until, worker_process

pytestmark = pytest.mark.usefixtures("transactional_db")

# Longer than Django's own wait (EMAIL_TIMEOUT_SECONDS, 10 s), which the outbox once used.
LATE_REPLY_SECONDS = 15
# Far above a handover (a dead sender known at the next 5 s tick): a generous bound on a
# busy machine, a minute short of the old two-minute lease.
HANDED_ON_WITHIN_SECONDS = 60.0
# How many of beat's 5-second ticks pass after a mail is done before a test says nothing
# more came: a retry would have come by then.
TICKS_AFTER = 4


def reset_asked(user: User) -> OutgoingMail:
    """The person asks for a password reset, as the page does: the mail is queued."""
    before = set(OutgoingMail.objects.values_list("pk", flat=True))
    assert Client().post("/accounts/password/reset/", {"email": user.email}).status_code == 302
    [queued] = OutgoingMail.objects.exclude(pk__in=before)
    return queued


def gone(mail: OutgoingMail) -> bool:
    return not OutgoingMail.objects.filter(pk=mail.pk).exists()


def another_mail_arrives(workers_smtp: ScriptedSmtpServer, user: User) -> None:
    """Another reset is asked for and arrives: the ticks that sent it have passed over every
    mail before it too, and sent again whatever they would have."""
    before = len(workers_smtp.received)
    reset_asked(user)
    workers_smtp.wait_for_messages(before + 1, timeout=HANDED_ON_WITHIN_SECONDS)


def test_a_reset_whose_end_is_answered_15_s_late_arrives_once_with_one_connection(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    workers_smtp.script(Script(end_of_data_delay=LATE_REPLY_SECONDS))
    mail = reset_asked(user)

    with worker_process(**processes), beat_process(**processes, folder=tmp_path):
        wait_until(lambda: gone(mail), "the reset to be sent and forgotten", timeout=120)
        # The one connection waited for the late reply: no second sender came meanwhile,
        # and once sent the mail is no more, so none can come after.
        assert workers_smtp.connections == 1

    [received] = workers_smtp.received
    assert b"/accounts/password/reset/key/" in received
    assert workers_smtp.message_ids == [mail.message_id]


def test_a_worker_killed_waiting_for_the_reply_to_a_reset_leaves_it_unconfirmed_never_sent_again(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    workers_smtp.script(Script(end_of_data_delay=600))
    mail = reset_asked(user)

    with worker_process(**processes) as first, beat_process(**processes, folder=tmp_path):
        workers_smtp.wait_for_messages(1, timeout=60)
        kill_whole(first)
        with worker_process(**processes):
            wait_until(
                lambda: OutgoingMail.objects.get(pk=mail.pk).status == "sent_unconfirmed",
                "the dead sender's reset to be recorded unconfirmed",
                timeout=HANDED_ON_WITHIN_SECONDS,
            )
            another_mail_arrives(workers_smtp, user)

    unconfirmed = OutgoingMail.objects.get(pk=mail.pk)
    assert workers_smtp.message_ids[0] == mail.message_id and workers_smtp.message_ids.count(mail.message_id) == 1
    assert "it may have been delivered, so it is not sent again" in unconfirmed.error
    # It held a link that signs the person in: the record stays, what it said does not.
    assert (unconfirmed.subject, unconfirmed.body_text, unconfirmed.body_html) == ("", "", "")


def test_a_worker_killed_before_the_end_of_a_reset_leaves_it_to_a_live_worker_which_sends_it_once(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    workers_smtp.script(Script(hold_at_rcpt=True))
    mail = reset_asked(user)

    with worker_process(**processes) as first, beat_process(**processes, folder=tmp_path):
        assert workers_smtp.held.wait(timeout=60), "the worker never reached the SMTP server"
        claimed = OutgoingMail.objects.get(pk=mail.pk)
        kill_whole(first)
        with worker_process(**processes):
            wait_until(lambda: gone(mail), "a live worker to send it", timeout=HANDED_ON_WITHIN_SECONDS)

    assert (claimed.status, claimed.body_sent_at) == ("sending", None)
    assert workers_smtp.message_ids == [mail.message_id]


def test_a_second_reset_asked_for_is_a_second_mail_and_each_arrives_once(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    # The first waits on a late reply; the second is asked for meanwhile.
    workers_smtp.script(Script(end_of_data_delay=LATE_REPLY_SECONDS))
    first = reset_asked(user)

    with worker_process(**processes), beat_process(**processes, folder=tmp_path):
        workers_smtp.wait_for_connections(1, timeout=60)
        second = reset_asked(user)
        wait_until(lambda: gone(first) and gone(second), "both resets to be sent", timeout=120)

    assert sorted(workers_smtp.message_ids) == sorted([first.message_id, second.message_id])
    assert first.message_id != second.message_id
