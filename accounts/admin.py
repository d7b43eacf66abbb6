"""People in the admin, where support staff start: a person's page links to everything the
app keeps about them. Staff who are not superusers see and fix accounts, but cannot raise
anyone's rights, their own included, nor touch a superuser's account. No one sets a
person's password or sign-in address here (staff could then sign in as them): staff may
send a reset link to the person's own address instead. Every change is recorded for the
person (memory/staff_audit.py), a change of their rights by what it gave or took away.
Groups and second factors: accounts/admin_rights.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from django.contrib import admin, messages
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import forms as auth_forms
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.html import format_html_join

# Registered with it: groups and second factors, beside the people they belong to.
from accounts import admin_rights  # noqa: F401
from accounts.forgetting import account_delete
from accounts.models import User
from accounts.rights import Rights, rights_changes, rights_of
from accounts.staff_actions import password_reset_link_send_by_staff
from coach.models import ChatSession, Message
from emails.models import Email, EmailPreference
from infra.admin import SupportSearch, TabularInline, admin_link
from memory.models import Memory, MemoryEvent, MemoryProposal, PrivateTextViewing
from memory.staff_audit import StaffActionAudit, staff_action_record

if TYPE_CHECKING:
    from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
    from django.contrib.auth.forms import UserChangeForm
else:
    # Generic in django-stubs alone, as infra/admin.py's ModelAdmin.
    class DjangoUserAdmin[U: User](auth_admin.UserAdmin):
        pass

    class UserChangeForm[U: User](auth_forms.UserChangeForm):
        pass


RIGHTS = ["is_staff", "is_superuser", "groups", "user_permissions"]
# Set on the request by a person's save: their rights before the change.
_RIGHTS_BEFORE = "person_rights_before"

# allauth's addresses are shown on the person's page, not in an "Accounts" section of their
# own beside the people (two sections of one name, for one thing).
if admin.site.is_registered(EmailAddress):
    admin.site.unregister(EmailAddress)


class EmailAddressInline(TabularInline[EmailAddress, User]):
    # Shown, never edited: an address staff could add, change or verify is one they could
    # send a reset link to and sign in with.
    model = EmailAddress
    fields = ["email", "verified", "primary"]
    readonly_fields = ["email", "verified", "primary"]
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name = "sign-in address"
    verbose_name_plural = "sign-in addresses (verified ones can sign in)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PersonChangeForm(UserChangeForm[User]):
    # No password field: its link led to a form that set one.
    password = None  # type: ignore[assignment]


@admin.register(User)
class UserAdmin(SupportSearch[User], StaffActionAudit, DjangoUserAdmin[User]):
    ordering = ["email"]
    list_display = ["email", "pk", "name", "is_active", "memory_enabled", "is_staff", "date_joined"]
    list_filter = ["is_active", "is_staff", "memory_enabled"]
    search_fields = ["email", "name"]
    person_path = ""
    inlines = [EmailAddressInline]
    form = PersonChangeForm
    readonly_fields = ["everything_kept"]
    actions = ["send_password_reset_link"]
    fieldsets = [
        (None, {"fields": ["email", "name", "time_zone", "memory_enabled"]}),
        ("What the app keeps about this person", {"fields": ["everything_kept"]}),
        ("Permissions", {"fields": ["is_active", *RIGHTS]}),
        ("Dates", {"fields": ["last_login", "date_joined", "onboarded_at"]}),
    ]
    add_fieldsets = [(None, {"classes": ["wide"], "fields": ["email", "password1", "password2"]})]

    @admin.display(description="records")
    def everything_kept(self, person: User) -> str:
        """One click from the person to each kind of row about them (each list filtered to them)."""
        if person.pk is None:
            return "-"
        mine = {"user__id__exact": person.pk}
        links = [
            (Memory, "memories", Memory.objects.filter(user=person).count(), mine),
            (MemoryEvent, "memory history", MemoryEvent.objects.filter(user=person).count(), mine),
            (MemoryProposal, "suggested changes", MemoryProposal.objects.filter(user=person).count(), mine),
            (ChatSession, "conversations", ChatSession.objects.filter(user=person).count(), mine),
            (
                Message,
                "messages",
                Message.objects.filter(session__user=person).count(),
                {"session__user__id__exact": person.pk},
            ),
            (Email, "emails", Email.objects.filter(user=person).count(), mine),
            (EmailPreference, "email preferences", EmailPreference.objects.filter(user=person).count(), mine),
            (Authenticator, "second factors", Authenticator.objects.filter(user=person).count(), mine),
            (
                PrivateTextViewing,
                "staff readings of their private text",
                PrivateTextViewing.objects.filter(person=person).count(),
                {"person__id__exact": person.pk},
            ),
        ]
        return format_html_join(
            " · ",
            "{}",
            ((admin_link(model, f"{label} ({count})", **filters),) for model, label, count, filters in links),
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            # The sign-in address is the person's to change, on their account page.
            fields.append("email")
        return fields if request.user.is_superuser else [*fields, *RIGHTS]

    def save_model(self, request: HttpRequest, obj: User, form: ModelForm[User], change: bool) -> None:
        stored = User.objects.filter(pk=obj.pk).first() if change else None
        setattr(request, _RIGHTS_BEFORE, rights_of(stored) if stored else Rights())
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: ModelForm[User], formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # Each right given or taken away, in words, for the person it touches.
        staff, person = request.user, form.instance
        if staff.is_authenticated:
            for what in rights_changes(getattr(request, _RIGHTS_BEFORE, Rights()), rights_of(person)):
                staff_action_record(staff=staff, person=person, what=what)

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        # Only a superuser's own password, here: anyone else's would let staff become them.
        if not (request.user.is_superuser and str(request.user.pk) == str(id)):
            raise Http404
        return super().user_change_password(request, id, form_url)

    @admin.action(description="Send a link to set a new password, to their own address", permissions=["change"])
    def send_password_reset_link(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        staff = request.user
        # (Only staff reach the admin: an anonymous visitor never sends anything.)
        if not staff.is_authenticated:
            return
        sent = [
            person
            for person in queryset
            if (staff.is_superuser or not person.is_superuser)
            and password_reset_link_send_by_staff(request=request, staff=staff, person=person)
        ]
        self.message_user(request, f"Sent a link to set a new password to {len(sent)} of {queryset.count()}.")
        if len(sent) < queryset.count():
            self.message_user(request, "Some had no verified address, or were superusers.", messages.WARNING)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        # Staff deleting a person erase them as they would themselves: their queued mail,
        # their replies kept in Redis and their rate-limit counters go too, not only rows.
        account_delete(user=obj, hosts=[request.get_host()])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for person in queryset:
            account_delete(user=person, hosts=[request.get_host()])
