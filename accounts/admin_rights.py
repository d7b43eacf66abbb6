"""Rights and second factors in the admin.

Staff who are not superusers never change a right, their own or anyone's, through any
admin screen: they may read groups, never add, change or delete one, and the rights on a
person's page are read-only to them (accounts/admin.py). A superuser's change to anyone's
rights, or to a group's, is recorded for each person it touches and shown on their memory
page, as every staff action is (memory/staff_audit.py).

Second factors are their owner's: no admin screen adds one or changes one, and none shows
their secrets. A superuser may remove one (a lost phone), which is recorded, mailed to the
person and shown to them; staff who are not superusers cannot.
"""

from __future__ import annotations

from typing import Any

from allauth.mfa.models import Authenticator
from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from accounts.models import User
from accounts.rights import group_changes, group_permissions
from accounts.staff_actions import second_factor_remove_by_staff
from infra.admin import ReadOnlyAdmin, SupportSearch
from memory.staff_audit import staff_action_record

for model in (Group, Authenticator):
    if admin.site.is_registered(model):
        admin.site.unregister(model)

# Set on the request by a group's save: its name and permissions before the change.
_GROUP_BEFORE = "group_rights_before"


def _superuser(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_superuser)


@admin.register(Group)
class GroupAdmin(auth_admin.GroupAdmin):
    """Groups, read by staff, changed by superusers only; each member is told of a change."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _superuser(request) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _superuser(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _superuser(request) and super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Group, form: ModelForm[Group], change: bool) -> None:
        stored = Group.objects.filter(pk=obj.pk).first() if change else None
        before = (stored.name, group_permissions(stored)) if stored else (obj.name, frozenset[str]())
        setattr(request, _GROUP_BEFORE, before)
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: ModelForm[Group], formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        group = form.instance
        name, permissions = getattr(request, _GROUP_BEFORE, (group.name, frozenset()))
        said = group_changes(group.name, permissions, group_permissions(group), renamed_from=name)
        _tell_members(request, group, said)

    def delete_model(self, request: HttpRequest, obj: Group) -> None:
        _tell_members(request, obj, [f"deleted your group {obj.name}"])
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        for group in queryset:
            _tell_members(request, group, [f"deleted your group {group.name}"])
        super().delete_queryset(request, queryset)


def _tell_members(request: HttpRequest, group: Group, said: list[str]) -> None:
    staff = request.user
    if not said or not staff.is_authenticated:
        return
    for member in User.objects.filter(groups=group):
        for what in said:
            staff_action_record(staff=staff, person=member, what=what)


@admin.register(Authenticator)
class AuthenticatorAdmin(SupportSearch[Authenticator], ReadOnlyAdmin[Authenticator]):
    """Who has which second factor, and when it was last used; never its secret. Removal
    only, by a superuser, recorded and told to the person (second_factor_remove_by_staff)."""

    list_display = ["user", "type", "created_at", "last_used_at"]
    list_filter = ["type"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = readonly_fields = ("user", "type", "created_at", "last_used_at")

    def has_delete_permission(self, request: HttpRequest, obj: Authenticator | None = None) -> bool:
        return _superuser(request) and admin.ModelAdmin.has_delete_permission(self, request, obj)

    def delete_model(self, request: HttpRequest, obj: Authenticator) -> None:
        if request.user.is_authenticated:
            second_factor_remove_by_staff(staff=request.user, authenticator=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Authenticator]) -> None:
        for authenticator in queryset.select_related("user"):
            self.delete_model(request, authenticator)
