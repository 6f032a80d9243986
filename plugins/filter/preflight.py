# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters for the checks that run before anything is written (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import manifest_yaml as _manifest_yaml
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import manifest_checks as _manifest_checks
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import preflight as _preflight


def manifest_objects(text, max_values=_manifest_checks.MAX_EXPANDED_VALUES):
    """The objects of a manifest, read safely; malformed YAML, unsafe tags, alias bombs and non-objects are errors."""
    try:
        return _manifest_checks.manifest_objects(text, max_values=max_values)
    except _manifest_yaml.ManifestError as exc:
        raise AnsibleFilterError("manifest: %s" % exc) from None


def missing_node_errors(wanted, existing, field="nodes"):
    """One message naming the nodes of ``wanted`` that ``existing`` (Node objects or names) lacks; empty when all exist."""
    return _preflight.missing_node_errors(wanted, existing, field=field)


def quota_shrink_errors(quota, hard, option="hard", allow_option="allow_shrink"):
    """One message per quota key that ``hard`` would set below what the live ``quota`` already uses."""
    try:
        return _preflight.quota_shrink_errors(quota, hard, option=option, allow_option=allow_option)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def team_fill_errors(gpus, pods, over_pod, gpus_field="gpus", pods_field="pods", gpus_fix="gpus"):
    """One message when the team's quota is not a whole number of 1 or more, or its Pods do not fill it exactly."""
    try:
        return _preflight.team_fill_errors(gpus, pods, over_pod, gpus_field, pods_field, gpus_fix)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s pre-write check filters."""

    def filters(self):
        return {
            "manifest_objects": manifest_objects,
            "missing_node_errors": missing_node_errors,
            "quota_shrink_errors": quota_shrink_errors,
            "team_fill_errors": team_fill_errors,
        }
