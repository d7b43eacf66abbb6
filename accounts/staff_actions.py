"""What staff may do for a person instead of acting as them (DESIGN.md section 8).

Staff never set a person's password or sign-in address. When someone cannot sign in,
staff may send a link to set a new password, to the person's own primary address only:
the person chooses the password, and the link reaches no one but them. Each sending is
recorded and shown to the person on their memory page."""

from __future__ import annotations

from allauth.account.internal.flows.password_reset import request_password_reset
from allauth.account.models import EmailAddress
from django.http import HttpRequest

from accounts.models import User
from memory.staff_audit import staff_action_record

RESET_LINK_SENT = "sent you a link to set a new password"


def password_reset_link_send_by_staff(*, request: HttpRequest, staff: User, person: User) -> bool:
    """Mail `person` a link to set a new password, at their own primary address; recorded.
    False (nothing sent) when they have no verified primary address to send it to."""
    address = EmailAddress.objects.filter(user=person, primary=True, verified=True).first()
    if address is None:
        return False
    request_password_reset(request, address.email, [person], None)
    staff_action_record(staff=staff, person=person, what=RESET_LINK_SENT)
    return True
