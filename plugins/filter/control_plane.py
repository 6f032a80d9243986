# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that tell whether a cluster's control plane is whole and whether a running lab cluster is the one asked for.

Documentation: one sidecar ``<filter>.yml`` per filter.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import control_plane as _control_plane


def stale_lease_errors(leases, components, now, fix, since=None):
    """One message naming every component whose kube-system leader Lease is missing or was not renewed in time."""
    try:
        return _control_plane.lease_errors(leases, components, now, fix, since)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("stale_lease_errors: %s" % exc) from None


def kwokctl_mismatches(asked, documents, server_version=None):
    """How a running kwokctl cluster differs from what is asked (bind address, versions, components)."""
    return _control_plane.kwokctl_mismatches(asked, documents, server_version)


def kwokctl_ports(base):
    """The kwokctl options that put a lab cluster's listeners on ``base`` .. ``base + 5``; ``{}`` for 0."""
    try:
        return _control_plane.kwokctl_ports(base)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def build_progress(started, component, version, now, log_text="", finished=False, rc=None):
    """The line shown while a control-plane component builds: component, elapsed time since ``started``, step."""
    try:
        return _control_plane.build_progress(component, version, started, now, log_text, finished, rc)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("build_progress: %s" % exc) from None


class FilterModule:
    """gpushare.k8s control-plane filters."""

    def filters(self):
        return {
            "build_progress": build_progress,
            "stale_lease_errors": stale_lease_errors,
            "kwokctl_mismatches": kwokctl_mismatches,
            "kwokctl_ports": kwokctl_ports,
        }
