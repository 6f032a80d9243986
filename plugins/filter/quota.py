# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Quota filters (documentation: the sidecar ``quota_resource_names.yml``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils import quota_coverage as _coverage


def quota_resource_names(resources, inventory=None):
    """The resource names a quota limits: ``auto`` (every name ``inventory`` advertises, nvidia.com/gpu first) or a checked list."""
    try:
        return _coverage.resolve_quota_resources(resources, inventory)
    except _coverage.CoverageError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s quota filters."""

    def filters(self):
        return {"quota_resource_names": quota_resource_names}
