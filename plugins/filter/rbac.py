# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters for the least-privilege RBAC (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import rbac as _rbac


def rbac_objects(settings):
    """Every object of the RBAC (dicts), every name checked first."""
    try:
        return _rbac.rbac_objects(settings)
    except _rbac.InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def rbac_manifest(settings):
    """The objects of ``rbac_objects`` as plain YAML, each rule commented with the lab step that needs it."""
    try:
        return _rbac.rbac_manifest(settings)
    except _rbac.InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def rbac_token_secrets(settings):
    """The long-lived token Secrets of the ServiceAccounts (created only with token_source=secret)."""
    try:
        return _rbac.token_secrets(settings)
    except _rbac.InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def object_drift(desired, live):
    """Paths where the live object differs from the desired one; empty when it already holds every desired field."""
    return _rbac.object_drift(desired, live)


class FilterModule:
    """gpushare.k8s RBAC filters."""

    def filters(self):
        return {
            "object_drift": object_drift,
            "rbac_manifest": rbac_manifest,
            "rbac_objects": rbac_objects,
            "rbac_token_secrets": rbac_token_secrets,
        }
