# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's checks before its first write: its names, the data alone, the control plane, the data against the cluster.

The names check is :func:`inventory.lab_name_errors` (every namespace and object name the lab writes);
:func:`input_errors` validates every device-plugin config, node, Pod and the team's quota with the inventory model
and says where the parameters disagree with each other; :func:`control_plane_errors` judges the kube-system leader
Leases; :func:`cluster_errors` checks the mode and the inventory against what the cluster holds. :func:`run_preflight`
reads the cluster once (GETs and LISTs, never a write) and runs the checks asked for. Every message names the
inventory field and the fix. No Ansible import.
"""

from __future__ import annotations

import copy
import datetime

from ..k8s import control_plane as _control_plane
from ..nvidia import gpu_operator as _op
from ..requests import guards as _guards
from . import inventory as _inv
from . import preflight as _preflight
from ..requests import quota_coverage as _coverage
from ..k8s.cluster_objects import Route, api_path, call_json, list_pages
from ..errors import ApiCallError, InputError
from ..names import GPU_RESOURCE
from ..k8s.auth import AUTH_ARG_SPEC, K8sAuthError, build_api_client


__all__ = ["CHECKS", "PREFLIGHT_ARG_SPEC", "cluster_errors", "control_plane_errors", "input_errors", "run_preflight"]

CHECKS = ("names", "input", "control_plane", "cluster")

PREFLIGHT_ARG_SPEC = dict(
    checks=dict(type="list", elements="str", choices=list(CHECKS), default=list(CHECKS)),
    names=dict(type="dict", default={}),
    nodes=dict(type="list", elements="raw"),
    configs=dict(type="raw"),
    initial_configs=dict(type="list", elements="raw", default=[]),
    configmap=dict(type="str", default="device-plugin-configs"),
    configmap_namespace=dict(type="str", default="gpu-share"),
    split_pods=dict(type="list", elements="raw", default=[]),
    placement=dict(type="list", elements="raw", default=[]),
    image=dict(type="str", default="registry.k8s.io/pause:3.10"),
    team_namespace=dict(type="str", default="team-a"),
    team_quota=dict(type="raw", default={"name": "gpu-quota", "gpus": 2}),
    team_pods=dict(type="list", elements="raw", default=[]),
    team_over_pod=dict(type="str", default="team-over"),
    allow_quota_shrink=dict(type="bool", default=False),
    mode=dict(type="str", choices=["advertise", "operator"], default="advertise"),
    cluster_policy=dict(type="str", default="cluster-policy"),
    control_plane_leases=dict(type="list", elements="str", default=["kube-controller-manager", "kube-scheduler"]),
    control_plane_fix=dict(type="str", default="restart them; on the local lab cluster run the playbook gpushare.k8s.cluster (`make cluster` in a checkout)"),
)
PREFLIGHT_ARG_SPEC.update(copy.deepcopy(AUTH_ARG_SPEC))


class PreflightError(InputError):
    """The lab's data is wrong, before anything is read from the cluster (an :class:`InputError`: field, problem, fix)."""


def _names(values):
    return ", ".join(str(value) for value in values)


def _model(params):
    """The inventory model of the lab's data: ``(inventory, quota resource names)``; raises on the first bad value."""
    if params.get("nodes") is None or params.get("configs") is None:
        raise PreflightError("gpushare_nodes, gpushare_device_plugin_configs", "required for the input and cluster checks",
                             "pass the lab's gpushare_nodes and gpushare_device_plugin_configs")
    _inv.render_configs(params["configs"])  # every config, step 7's included
    inventory = _inv.gpu_inventory(params["nodes"], params["configs"])
    _inv.pod_objects(params["split_pods"], params["image"])
    placed = [pod for pod, _fits in _inv.place(params["placement"], params["nodes"], params["configs"])]
    _inv.pod_objects(placed, params["image"])
    quota = params["team_quota"]
    if not isinstance(quota, dict):
        raise PreflightError("gpushare_team_quota", "must be a mapping, got %r" % (quota,), "write e.g. {name: gpu-quota, gpus: 2}")
    names = _coverage.resolve_quota_resources(quota.get("resources", [GPU_RESOURCE]), inventory)
    return inventory, names


# The lab's inventory fields of the coverage quota (gpushare_team_quota.coverage), for the messages.
_COVERAGE_FIELDS = {
    "name": "gpushare_team_quota.coverage.name",
    "limits": "gpushare_team_quota.coverage.limits",
    "uncovered": "gpushare_team_quota.coverage.uncovered",
    "units": "gpushare_team_quota.gpus",
    "resources": "gpushare_team_quota.resources",
    "allow_shrink": "team_quota_allow_shrink",
}
_COVERAGE_KEYS = ("name", "limits", "uncovered")


def _team_coverage(params, inventory, names, existing=None):
    """The coverage quota step 5 writes beside the team's (:func:`quota_coverage.team_coverage`), from the lab's fields."""
    quota = params["team_quota"]
    coverage = quota.get("coverage")
    if coverage is None:
        coverage = {}
    if not isinstance(coverage, dict):
        raise PreflightError("gpushare_team_quota.coverage", "must be a mapping {name, limits, uncovered}, got %r" % (coverage,),
                             "write e.g. {name: %s, limits: {}, uncovered: []}" % _coverage.COVERAGE_QUOTA)
    unknown = sorted(str(key) for key in coverage if key not in _COVERAGE_KEYS)
    if unknown:
        raise PreflightError("gpushare_team_quota.coverage", "unknown key%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                             "use %s" % ", ".join(_COVERAGE_KEYS))
    reachable = _coverage.reachable_names(inventory, params["configs"])
    return _coverage.team_coverage(reachable, names, quota.get("gpus"), params["team_namespace"], quota.get("name"),
                                   name=coverage.get("name", _coverage.COVERAGE_QUOTA), limits=coverage.get("limits"),
                                   uncovered=coverage.get("uncovered"), existing=existing, fields=_COVERAGE_FIELDS)


def input_errors(params):
    """``(messages, inventory, quota names)``: where the lab's parameters disagree with each other.

    A value the model refuses raises (ValueError with the field and the fix) before the parameters are compared.
    """
    inventory, quota_names = _model(params)
    nodes, configs = params["nodes"], params["configs"]
    errors = []
    undefined = [name for name in params["initial_configs"] if name not in configs]
    if undefined:
        errors.append("gpushare_device_plugin_initial_configs: %s not among gpushare_device_plugin_configs (%s). Fix: add the config "
                      "or remove the name." % (_names(undefined), _names(configs)))
    unconfigured = [node.get("name") for node in nodes if "mig" not in node and "config" not in node]
    if unconfigured:
        errors.append("gpushare_nodes: %s set neither config nor mig, so step 2 cannot label them. Fix: add config: <a name of "
                      "gpushare_device_plugin_configs> (e.g. default), or a mig layout." % _names(unconfigured))
    advertised = sorted({name for resources in inventory.values() for name in resources})
    unplaceable = [pod.get("name") for pod in params["split_pods"] if pod.get("resource") not in advertised]
    if unplaceable:
        errors.append("gpushare_split_pods: %s ask for a resource no node of gpushare_nodes advertises (they would stay Pending). "
                      "Fix: ask for one of %s." % (_names(unplaceable), _names(advertised)))
    fill_errors = _preflight.team_fill_errors(params["team_quota"].get("gpus"), params["team_pods"], params["team_over_pod"],
                                              "gpushare_team_quota.gpus", "gpushare_team_pods", "gpus")
    errors.extend(fill_errors)
    if not any(error.startswith("gpushare_team_quota.gpus:") for error in fill_errors):
        _team_coverage(params, inventory, quota_names)  # raises on a bad coverage setting, naming it
    return errors, inventory, quota_names


def control_plane_errors(leases, components, now, fix):
    """Messages for control-plane components whose kube-system leader Lease is missing or stale."""
    return _control_plane.lease_errors(leases, components, now, fix)


def cluster_errors(params, quota_names, cluster_nodes, configmap, quota, coverage_quota=None):
    """The inventory against the cluster: every node exists, no config label the ConfigMap lacks after step 1, no quota shrink
    (the team's, or the coverage quota beside it, ``coverage_quota`` the live one), no coverage quota's name taken by another."""
    nodes = params["nodes"]
    keys = list(params["initial_configs"]) + list(((configmap or {}).get("data") or {}))
    keys = list(dict.fromkeys(keys))  # after step 1 the ConfigMap holds the initial configs and whatever keys it had
    errors = _preflight.missing_node_errors(nodes, cluster_nodes, field="gpushare_nodes")
    errors += _guards.config_label_errors([node for node in nodes if "mig" not in node], keys, configmap=params["configmap"],
                                          namespace=params["configmap_namespace"])
    if not params["allow_quota_shrink"]:
        hard = {"requests." + name: params["team_quota"]["gpus"] for name in quota_names}
        errors += _preflight.quota_shrink_errors(quota or {}, hard, option="gpushare_team_quota.gpus", allow_option="team_quota_allow_shrink")
    try:
        coverage = _team_coverage(params, _inv.gpu_inventory(nodes, params["configs"]), quota_names, existing=coverage_quota)
    except _coverage.CoverageError as exc:  # a coverage quota's name another quota holds
        return errors + [str(exc) + "."]
    if not params["allow_quota_shrink"]:
        errors += _preflight.quota_shrink_errors(coverage_quota or {}, coverage["hard"], option=_COVERAGE_FIELDS["limits"],
                                                 allow_option="team_quota_allow_shrink")
    return errors


class _Reader:
    """GETs and LISTs on one client; a 404 is "absent", any other refusal an ApiCallError with the API server's message."""

    def __init__(self, api_client, timeout):
        self.api_client = api_client
        self.timeout = timeout

    def get(self, api_version, plural, namespace, name):
        try:
            return call_json(Route(self.api_client, "GET", api_path(api_version, plural, namespace, name)), timeout=self.timeout)
        except ApiCallError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, api_version, plural, namespace=None):
        return list_pages(Route(self.api_client, "GET", api_path(api_version, plural, namespace)), timeout=self.timeout)


def _failed(msg, **extra):
    return dict(extra, changed=False, failed=True, msg=msg)


def run_preflight(params, now=None):
    """Run ``params["checks"]`` in order (names, input, control_plane, cluster); the task's result.

    The first failing check ends the call: its messages joined, the field and the fix in each. Reads the
    credentials may not make (Leases, ClusterPolicies) are skipped with a warning, except the ClusterPolicy
    read in operator mode, which the mode needs.
    """
    checks = params.get("checks") or list(CHECKS)
    warnings = []
    result = dict(changed=False, checks=list(checks))
    quota_names = None
    if "names" in checks:
        try:
            errors = _inv.lab_name_errors(params.get("names") or {})
        except ValueError as exc:
            return _failed(str(exc))
        if errors:
            return _failed(" ".join(errors))
        if not set(checks) - {"names"}:
            return dict(result, msg="Every name the lab writes is one Kubernetes accepts.")
    if "input" in checks or "cluster" in checks:
        try:
            errors, inventory, quota_names = input_errors(params)
        except ValueError as exc:  # the model's own errors: field, problem and fix
            return _failed(str(exc))
        if errors:
            return _failed(" ".join(errors))
        result["inventory"] = inventory
        result["quota_resource_names"] = quota_names
    if "control_plane" not in checks and "cluster" not in checks:
        return dict(result, msg="The lab's parameters agree with each other.")
    try:
        reader = _Reader(build_api_client(params), params.get("request_timeout"))
    except (K8sAuthError, ValueError) as exc:
        return _failed(str(exc))
    try:
        if "control_plane" in checks and params.get("control_plane_leases"):
            try:
                leases = reader.list("coordination.k8s.io/v1", "leases", "kube-system")
            except ApiCallError as exc:
                if exc.status != 403:
                    return _failed("cannot read Leases in kube-system: %s" % exc)
                warnings.append("Not checked whether %s are running: these credentials may not read Leases in kube-system (%s)."
                                % (" and ".join(params["control_plane_leases"]), exc))
            else:
                now = now or datetime.datetime.now(datetime.timezone.utc)
                errors = control_plane_errors(leases, params["control_plane_leases"], now, params["control_plane_fix"])
                if errors:
                    return _failed(" ".join(errors))
        if "cluster" in checks:
            cluster_nodes = reader.list("v1", "nodes")
            configmap = reader.get("v1", "configmaps", params["configmap_namespace"], params["configmap"])
            quota = reader.get("v1", "resourcequotas", params["team_namespace"], params["team_quota"].get("name"))
            coverage_name = (params["team_quota"].get("coverage") or {}).get("name", _coverage.COVERAGE_QUOTA)
            coverage_quota = reader.get("v1", "resourcequotas", params["team_namespace"], coverage_name)
            try:
                policies = reader.list("nvidia.com/v1", "clusterpolicies")
            except ApiCallError as exc:
                if exc.status == 404:  # the GPU Operator's CRD is not installed
                    policies = []
                elif params["mode"] == "operator":
                    return _failed("cannot list the GPU operator's ClusterPolicies, which operator mode needs: %s" % exc)
                else:
                    policies = []
                    warnings.append("These credentials may not list ClusterPolicies, so advertise mode is not checked against a GPU "
                                    "operator: %s" % str(exc)[:200])
            errors = _op.mode_errors(params["mode"], params["nodes"], cluster_nodes, policies, params["cluster_policy"])
            if errors:
                return _failed(" ".join(errors) + " Nothing was written.", warnings=warnings)
            errors = cluster_errors(params, quota_names, cluster_nodes, configmap, quota, coverage_quota)
            if errors:
                return _failed(" ".join(errors), warnings=warnings)
    except ApiCallError as exc:
        return _failed(str(exc), warnings=warnings)
    except ValueError as exc:  # a value only the cluster's answer shows to be wrong (a quota quantity)
        return _failed(str(exc), warnings=warnings)
    if warnings:
        result["warnings"] = warnings
    return dict(result, msg="Checked: %s." % ", ".join(check.replace("_", " ") for check in checks))
