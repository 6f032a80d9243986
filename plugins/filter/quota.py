# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Quota filters (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import quota_coverage as _coverage
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import plain


def quota_resource_names(resources, inventory=None):
    """The resource names a quota limits: ``auto`` (every name ``inventory`` advertises, nvidia.com/gpu first) or a checked list."""
    try:
        return _coverage.resolve_quota_resources(resources, inventory)
    except _coverage.CoverageError as exc:
        raise AnsibleFilterError(str(exc)) from None


def team_coverage_quota(team_resources, inventory=None, configs=None, intents=None, settings=None):
    """The team's coverage quota: every GPU resource the inventory, the configs and the intents reach that the team's own
    quota (limiting ``team_resources``) does not name; ``{object, hard, covers, intended, msg}``."""
    settings = plain(settings) or {}
    if not isinstance(settings, dict):
        raise AnsibleFilterError("team_coverage_quota: settings must be a mapping, got %s" % type(settings).__name__)
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise AnsibleFilterError("team_coverage_quota: unknown setting %s; use %s" % (unknown[0], ", ".join(_SETTINGS)))
    try:
        reachable = _coverage.reachable_names(plain(inventory) or {}, plain(configs) or {}, plain(intents) or {})
        classes = None
        if "dra_nodes" in settings:  # the DRA track: the device classes the nodes' devices fall in, the bridged resource
            classes, bridged = _coverage.reachable_classes(settings["dra_nodes"], settings.get("extended_resource") or None)
            for resource, entry in bridged.items():
                reachable.setdefault(resource, {"nodes": [], "configs": [], "intents": []}).update(
                    classes=entry["classes"], nodes=sorted(set(reachable.get(resource, {}).get("nodes", []) + entry["nodes"])))
        return _coverage.team_coverage(reachable, plain(team_resources), settings.get("units"), settings.get("namespace"),
                                       settings.get("team_quota"), name=settings.get("name", _coverage.COVERAGE_QUOTA),
                                       limits=settings.get("limits"), uncovered=settings.get("uncovered"),
                                       existing=settings.get("existing"), fields=settings.get("fields"), classes=classes,
                                       team_classes=settings.get("team_classes"))
    except ValueError as exc:  # CoverageError, and a config the device-plugin model refuses
        raise AnsibleFilterError(str(exc)) from None


_SETTINGS = ("units", "namespace", "team_quota", "name", "limits", "uncovered", "existing", "fields", "dra_nodes", "extended_resource",
             "team_classes")


class FilterModule:
    """gpushare.k8s quota filters."""

    def filters(self):
        return {"quota_resource_names": quota_resource_names, "team_coverage_quota": team_coverage_quota}
