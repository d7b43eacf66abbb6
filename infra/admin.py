"""What every app's admin shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin as ModelAdmin
    from django.contrib.admin import TabularInline as TabularInline
else:
    # django-stubs types the admin's classes as generic in their model (ModelAdmin[Memory]);
    # Django's own cannot be subscripted, so the apps subclass these, which can.
    class ModelAdmin[M: Model](admin.ModelAdmin):
        pass

    class TabularInline[C: Model, P: Model](admin.TabularInline):
        pass


# What a detail page shows, as get_fields says it: field names, or rows of them on one line.
type FieldGroups = list[str | list[str] | tuple[str, ...]]


class ReadOnlyAdmin[M: Model](ModelAdmin[M]):
    """Rows written only by the app itself (a ledger, a history): read in the admin, never
    edited there, since a change by hand could break what the app promises about them."""

    def has_add_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False


class SupportSearch[M: Model](ModelAdmin[M]):
    """A search box that finds what a support request names: a person's address (in
    `search_fields`), or a number, which is a row's id or the id of the person it is about."""

    # The path from a row to the person it is about ("user", "session__user", ...); empty
    # on the people themselves.
    person_path = "user"
    # Other ids a number may be (a memory's id in its history, say).
    other_ids: tuple[str, ...] = ()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # The person's page links to this list filtered to them (their id, nothing else).
        if self.person_path and lookup == f"{self.person_path}__id__exact":
            return True
        return super().lookup_allowed(lookup, value, request)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[M], search_term: str
    ) -> tuple[QuerySet[M], bool]:
        term = search_term.strip().removeprefix("#")
        if term.isdigit():
            number = int(term)
            found = Q(pk=number)
            for path in ([f"{self.person_path}__id"] if self.person_path else []) + list(self.other_ids):
                found |= Q(**{path: number})
            return queryset.filter(found), False
        return super().get_search_results(request, queryset, search_term)


def admin_link(model: type[Model], text: str, **filters: Any) -> str:
    """A link to `model`'s admin list, filtered (e.g. user__id__exact=7)."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), text)
