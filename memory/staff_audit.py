"""Every staff action on a person, recorded and shown to them (DESIGN.md section 8).

Reads of private text are recorded by memory/admin_privacy.py; this records the rest: an
addition, a change or a deletion made in the admin to anything about a person, and actions
such as sending them a reset link. A record names what was done by kind and id, never by
the person's words, and is listed on the person's memory page beside the readings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest

from memory.models import PrivateTextViewing

if TYPE_CHECKING:
    from accounts.models import User

# Set on the request by an admin whose save did something else than change the row (a
# protected memory's change that became a suggestion): the verb its record uses instead.
AUDIT_VERB = "staff_audit_verb"


def staff_action_record(*, staff: User, person: User, what: str) -> PrivateTextViewing:
    """Record that `staff` did `what` ("changed memory 4") to `person`'s account."""
    return PrivateTextViewing.objects.create(
        kind=PrivateTextViewing.Kind.ACTION,
        viewer=staff,
        viewer_email=staff.email,
        person=person,
        what=what[: PrivateTextViewing._meta.get_field("what").max_length],
        reason="",
    )


class StaffActionAudit(admin.ModelAdmin):  # type: ignore[type-arg]  # a mixin: the admin it joins names the model
    """A model admin whose additions, changes and deletions are recorded for the person the
    row is about (found by `person_path`, as in infra.admin.SupportSearch)."""

    person_path = "user"

    def person_for_audit(self, obj: Any) -> User | None:
        person: Any = obj
        for step in self.person_path.split("__") if self.person_path else []:
            person = getattr(person, step, None)
        return person if isinstance(person, get_user_model()) else None

    def _audit(self, request: HttpRequest, obj: Any, done: str) -> None:
        person = self.person_for_audit(obj)
        if person is None or person.pk is None:
            return
        staff = request.user
        # (Only staff reach the admin: an anonymous visitor never changes a row.)
        if not staff.is_authenticated:
            return
        name = "account" if person == obj else self.opts.verbose_name
        staff_action_record(staff=staff, person=person, what=f"{done} {name} {obj.pk}")

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        self._audit(request, obj, "added")
        return super().log_addition(request, obj, message)

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        self._audit(request, obj, getattr(request, AUDIT_VERB, "changed"))
        return super().log_change(request, obj, message)

    def log_deletions(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        for obj in queryset:
            # A person being erased takes their records with them: nothing to show them.
            if self.person_for_audit(obj) != obj:
                self._audit(request, obj, "deleted")
        return super().log_deletions(request, queryset)
