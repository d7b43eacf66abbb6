"""Private text in the admin (DESIGN.md section 8).

A person's words (a memory's key and text, its history, a suggested change, an email)
never appear in an admin list. On a detail page they are left out for staff without the
`memory.view_private_text` permission; staff with it are first asked why (a support
request, say), and each page they then open is recorded, with that reason, and shown to
the person on their memory page. A reason covers one person for REASON_LASTS.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from django import forms
from django.contrib.admin.utils import unquote
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from infra.admin import FieldGroups, ModelAdmin
from memory.models import PrivateTextViewing

if TYPE_CHECKING:
    from accounts.models import User

PERMISSION = "memory.view_private_text"
REASON_LASTS = timedelta(minutes=30)
SESSION_KEY = "private_text_reasons"


class ReasonForm(forms.Form):
    private_text_reason = forms.CharField(
        max_length=300,
        min_length=5,
        label="Why do you need to read this person's private text?",
        help_text="The person will see this reason and the date on their memory page.",
    )


class PrivateTextAdmin[M: Model](ModelAdmin[M]):
    """A model admin whose detail page holds private text: the fields in `private_fields`."""

    private_fields: tuple[str, ...] = ()

    def person_of(self, obj: M) -> User:
        # Each model's row names its person `user`; an admin of one that does not says so.
        person: User = getattr(obj, "user")  # noqa: B009
        return person

    def get_fields(self, request: HttpRequest, obj: M | None = None) -> FieldGroups:
        fields = list(super().get_fields(request, obj))
        return fields if self._may_read(request, obj) else [f for f in fields if f not in self.private_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: M | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        return fields if self._may_read(request, obj) else [f for f in fields if f not in self.private_fields]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        viewer = request.user
        # (Only staff reach the admin: an anonymous visitor is never a viewer.)
        if obj is not None and viewer.is_authenticated and viewer.has_perm(PERMISSION):
            person = self.person_of(obj)
            # A POST without a reason (a change, say) goes on to the usual permission
            # checks, with the private fields left out of its form.
            asking = request.method == "GET" or "private_text_reason" in request.POST
            if asking and _reason_for(request, person) is None:
                return self._ask_reason(request, obj, person)
            if request.method == "GET":
                _record(request, viewer, person, what=f"{self.opts.verbose_name} {obj.pk}")
        return super().change_view(request, object_id, form_url, extra_context)

    def _may_read(self, request: HttpRequest, obj: M | None) -> bool:
        if obj is None:
            # Adding: the only text on the page is what the staff member types.
            return True
        return request.user.has_perm(PERMISSION) and _reason_for(request, self.person_of(obj)) is not None

    def _ask_reason(self, request: HttpRequest, obj: M, person: User) -> HttpResponse:
        form = ReasonForm(request.POST if "private_text_reason" in request.POST else None)
        if form.is_valid():
            reasons = request.session.get(SESSION_KEY, {})
            reasons[str(person.pk)] = {
                "reason": form.cleaned_data["private_text_reason"],
                "until": time.time() + REASON_LASTS.total_seconds(),
            }
            request.session[SESSION_KEY] = reasons
            return HttpResponseRedirect(request.get_full_path())
        context = {
            **self.admin_site.each_context(request),
            "title": "State a reason",
            "form": form,
            "person": person,
            "opts": self.opts,
            "object_id": obj.pk,
        }
        return TemplateResponse(request, "admin/private_text_reason.html", context)


def _reason_for(request: HttpRequest, person: User) -> str | None:
    granted: dict[str, str | float] | None = request.session.get(SESSION_KEY, {}).get(str(person.pk))
    if not granted or float(granted["until"]) < time.time():
        return None
    return str(granted["reason"])


def _record(request: HttpRequest, viewer: User, person: User, *, what: str) -> None:
    PrivateTextViewing.objects.create(
        viewer=viewer,
        viewer_email=viewer.email,
        person=person,
        what=what,
        reason=_reason_for(request, person) or "",
    )
