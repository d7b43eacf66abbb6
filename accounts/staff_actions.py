"""What staff may do for a person instead of acting as them (DESIGN.md section 8).

Staff never set a person's password or sign-in address. When someone cannot sign in,
staff may send a link to set a new password, to the person's own primary address only:
the person chooses the password, and the link reaches no one but them. Each sending is
recorded and shown to the person on their memory page.

Second factors are their owner's to add or change. When one is lost (a phone gone), a
superuser may remove it: the person is told by email and on their memory page."""

from __future__ import annotations

from allauth.account.adapter import get_adapter
from allauth.account.internal.flows.password_reset import request_password_reset
from allauth.account.models import EmailAddress
from allauth.mfa.base.internal.flows import delete_dangling_recovery_codes
from allauth.mfa.models import Authenticator
from django.db import transaction
from django.http import HttpRequest

from accounts.models import User
from memory.staff_audit import staff_action_record

RESET_LINK_SENT = "sent you a link to set a new password"
SECOND_FACTORS = {
    Authenticator.Type.TOTP: "your authenticator app",
    Authenticator.Type.RECOVERY_CODES: "your recovery codes",
    Authenticator.Type.WEBAUTHN: "your security key",
}


def password_reset_link_send_by_staff(*, request: HttpRequest, staff: User, person: User) -> bool:
    """Mail `person` a link to set a new password, at their own primary address; recorded.
    False (nothing sent) when they have no verified primary address to send it to."""
    address = EmailAddress.objects.filter(user=person, primary=True, verified=True).first()
    if address is None:
        return False
    request_password_reset(request, address.email, [person], None)
    staff_action_record(staff=staff, person=person, what=RESET_LINK_SENT)
    return True


def second_factor_remove_by_staff(*, staff: User, authenticator: Authenticator) -> bool:
    """Remove `authenticator` from its owner's account, with the recovery codes it leaves
    with nothing to recover (as allauth does when the owner removes it); recorded, shown
    on the person's memory page and mailed to them. False when it was gone already."""
    person = authenticator.user
    removed = SECOND_FACTORS.get(authenticator.type, "a second factor")
    with transaction.atomic():
        deleted, _ = Authenticator.objects.filter(pk=authenticator.pk).delete()
        if not deleted:
            return False
        delete_dangling_recovery_codes(person)
        staff_action_record(staff=staff, person=person, what=f"removed {removed}")
    get_adapter().send_notification_mail("mfa/email/removed_by_staff", person, {"removed": removed})
    return True
