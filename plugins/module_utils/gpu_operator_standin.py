# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab cluster's GPU Operator stand-in: one level-triggered reconcile pass over every kwok GPU node.

It plays, by the operator's contract (see :mod:`gpu_operator`), the device plugin with its config
manager, gpu-feature-discovery and the MIG manager, on nodes whose simulated hardware the lab
cluster wrote when it created them (annotations ``gpushare.k8s/gpus`` and ``gpushare.k8s/gpu-product``):

* MIG manager: a node labelled ``nvidia.com/mig.config=<layout>`` gets ``nvidia.com/mig.config.state``
  ``pending``, then ``success`` with the layout applied (kept in annotation ``gpushare.k8s/mig-applied``,
  the stand-in's GPUs), or ``failed`` with the reason in ``gpushare.k8s/mig-failure`` when the GPUs
  cannot hold it. A failed or applied layout is not tried again until the label or the layout changes.
* device plugin: the config named by ``nvidia.com/device-plugin.config`` (or the ClusterPolicy default)
  is read from the ConfigMap the ClusterPolicy names; a missing ConfigMap or key leaves the old
  advertisement in place, as the real config manager's crash loop does. Capacity and allocatable get
  what :func:`gpu_operator.node_state` computes (through the collection's status writer, every other
  resource kept); ``nvidia.com/*`` resources it no longer advertises are removed.
* GFD: the labels :func:`gpu_operator.node_state` computes; stale GFD labels removed, others kept.

Every pass reads everything afresh, so a restart (its own or the API server's) leaves nothing stale.
No Ansible import; the lab cluster's component script runs it in a loop driven by watches.
"""

from __future__ import annotations

import json
import logging

try:
    import kubernetes  # noqa: F401 pylint: disable=unused-import

    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - the stand-in needs the library; the model does not
    HAS_KUBERNETES = False

try:
    from . import device_plugin as _dp
    from . import gpu_features as _features
    from . import gpu_operator as _op
    from .cluster_objects import ApiCallError, Route, api_path, call_json, list_pages
    from .node_status import MERGE_PATCH, CoreNodeApi, NodeResourcesError, NodeWriteError, apply_node_resources
except ImportError:  # loaded as plain modules, next to each other
    import device_plugin as _dp  # type: ignore[no-redef]
    import gpu_features as _features  # type: ignore[no-redef]
    import gpu_operator as _op  # type: ignore[no-redef]
    from cluster_objects import ApiCallError, Route, api_path, call_json, list_pages  # type: ignore[no-redef]
    from node_status import MERGE_PATCH, CoreNodeApi, NodeResourcesError, NodeWriteError, apply_node_resources  # type: ignore[no-redef]


__all__ = ["StandIn", "hardware_of"]

REQUEST_TIMEOUT = 10
_LOG = logging.getLogger("gpu-operator-standin")


def hardware_of(node):
    """``(gpus, product)`` of a node's simulated GPUs, or ``None`` for a node without them (or a bad annotation)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    gpus = annotations.get(_op.HARDWARE_GPUS_ANNOTATION)
    product = annotations.get(_op.HARDWARE_PRODUCT_ANNOTATION)
    if gpus is None or not product:
        return None
    try:
        count = int(gpus)
    except ValueError:
        return None
    return (count, product) if count > 0 else None


def _json_annotation(annotations, key):
    try:
        value = json.loads(annotations.get(key) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class StandIn:
    """The reconcile pass. ``reconcile()`` returns a list of what it changed (for the log)."""

    def __init__(self, api_client, namespace, timeout=REQUEST_TIMEOUT):
        self._api_client = api_client
        self._nodes = CoreNodeApi(api_client, request_timeout=timeout)
        self._namespace = namespace
        self._timeout = timeout

    # -- reads ---------------------------------------------------------------

    def cluster_policy(self):
        """The ClusterPolicy (the first by name; the operator allows one), or ``None``."""
        try:
            page = call_json(
                Route(self._api_client, "GET", api_path(_op.CLUSTER_POLICY_GROUP + "/" + _op.CLUSTER_POLICY_VERSION, _op.CLUSTER_POLICY_PLURAL)),
                timeout=self._timeout,
            )
        except ApiCallError as exc:
            if exc.status == 404:  # no CRD: no operator configured
                return None
            raise
        items = sorted(page.get("items") or [], key=lambda item: item["metadata"]["name"])
        return items[0] if items else None

    def configmap_data(self, name):
        if not name:
            return None
        try:
            return call_json(Route(self._api_client, "GET", api_path("v1", "configmaps", self._namespace, name)), timeout=self._timeout).get("data") or {}
        except ApiCallError as exc:
            if exc.status == 404:
                return None
            raise

    # -- writes --------------------------------------------------------------

    def _patch_metadata(self, name, labels=None, annotations=None):
        metadata = {}
        if labels:
            metadata["labels"] = labels
        if annotations:
            metadata["annotations"] = annotations
        if metadata:
            call_json(Route(self._api_client, "PATCH", api_path("v1", "nodes", name=name)), {"metadata": metadata}, timeout=self._timeout,
                      _content_type=MERGE_PATCH)

    # -- the pass ------------------------------------------------------------

    def reconcile(self):
        policy = self.cluster_policy()
        if policy is None:
            return []
        spec = policy.get("spec") or {}
        dp_config = (spec.get("devicePlugin") or {}).get("config") or {}
        mm_config = (spec.get("migManager") or {}).get("config") or {}
        dp_data = self.configmap_data(dp_config.get("name"))
        mm_data = self.configmap_data(mm_config.get("name"))
        actions = []
        for node in list_pages(Route(self._api_client, "GET", api_path("v1", "nodes")), timeout=self._timeout):
            hardware = hardware_of(node)
            if hardware is None:
                continue
            actions.extend(self._reconcile_node(node, hardware, spec, dp_config, dp_data, mm_config, mm_data))
        return actions

    def _mig_manager(self, node, hardware, mm_config, mm_data):
        """Apply the node's requested layout; return ``(gpu_state, actions)``."""
        name = node["metadata"]["name"]
        gpus, product = hardware
        labels = node["metadata"].get("labels") or {}
        annotations = node["metadata"].get("annotations") or {}
        applied = _json_annotation(annotations, _op.MIG_APPLIED_ANNOTATION) or {}
        gpu_state = applied.get("gpus")
        if not isinstance(gpu_state, list) or len(gpu_state) != gpus:
            gpu_state = [{"mig": False, "devices": {}} for _index in range(gpus)]
        wanted = labels.get(_op.MIG_CONFIG_LABEL)
        if not wanted:
            return gpu_state, []
        state = labels.get(_op.MIG_STATE_LABEL)
        entries = None
        problem = None
        if mm_data is None:
            problem = "ConfigMap %s/%s named by ClusterPolicy spec.migManager.config.name does not exist" % (self._namespace, mm_config.get("name"))
        else:
            try:
                layouts = _op.parse_mig_parted(mm_data.get(_op.MIG_PARTED_KEY, ""))
                entries = layouts.get(wanted)
                if entries is None:
                    problem = "layout %s is not in ConfigMap %s/%s (it has: %s)" % (
                        wanted, self._namespace, mm_config.get("name"), ", ".join(sorted(layouts)) or "none")
            except _op.LayoutError as exc:
                problem = str(exc)
        digest = _op.layout_digest(entries) if entries is not None else None
        if applied.get("layout") == wanted and applied.get("digest") == digest and state == "success":
            return gpu_state, []
        failure = _json_annotation(annotations, _op.MIG_FAILURE_ANNOTATION) or {}
        if failure.get("layout") == wanted and failure.get("digest") == digest and state == "failed":
            return gpu_state, []
        self._patch_metadata(name, labels={_op.MIG_STATE_LABEL: "pending"})
        if problem is None:
            try:
                new_state = _op.apply_layout(product, gpus, entries)
            except _op.LayoutError as exc:
                problem = str(exc)
        if problem is not None:
            reason = "cannot apply %s on %s (%d x %s): %s" % (wanted, name, gpus, product, problem)
            self._patch_metadata(
                name,
                labels={_op.MIG_STATE_LABEL: "failed"},
                annotations={_op.MIG_FAILURE_ANNOTATION: json.dumps({"layout": wanted, "digest": digest, "reason": reason}, sort_keys=True)},
            )
            return gpu_state, ["%s: mig.config %s failed: %s" % (name, wanted, problem)]
        self._patch_metadata(
            name,
            labels={_op.MIG_STATE_LABEL: "success"},
            annotations={
                _op.MIG_APPLIED_ANNOTATION: json.dumps({"layout": wanted, "digest": digest, "gpus": new_state}, sort_keys=True),
                _op.MIG_FAILURE_ANNOTATION: None,
            },
        )
        return new_state, ["%s: mig.config %s applied" % (name, wanted)]

    def _reconcile_node(self, node, hardware, spec, dp_config, dp_data, mm_config, mm_data):
        name = node["metadata"]["name"]
        gpus, product = hardware
        gpu_state, actions = self._mig_manager(node, hardware, mm_config, mm_data)
        labels = node["metadata"].get("labels") or {}
        key = labels.get(_op.DEVICE_PLUGIN_CONFIG_LABEL) or dp_config.get("default")
        config = None
        if dp_config.get("name"):
            if dp_data is None or not key or key not in dp_data:
                _LOG.warning("%s: config %r not in ConfigMap %s/%s: keeping the old advertisement (the config manager would crash-loop)",
                             name, key, self._namespace, dp_config.get("name"))
                return actions
            try:
                config = _dp.parse_config(dp_data[key], name=key)
            except _dp.ConfigError as exc:
                _LOG.warning("%s: config %s is invalid, keeping the old advertisement: %s", name, key, exc)
                return actions
        strategy = (spec.get("mig") or {}).get("strategy") or ((config or {}).get("flags") or {}).get("migStrategy") or "none"
        try:
            resources, gfd_labels = _op.node_state(name, product, gpu_state, config, strategy, config_name=key)
        except (_op.LayoutError, _dp.ConfigError, _features.FeatureError) as exc:
            _LOG.warning("%s: cannot advertise: %s", name, exc)
            return actions
        actions.extend(self._advertise(node, resources))
        patch = _features.label_patch(gfd_labels, labels)
        patch = {key: value for key, value in patch.items() if labels.get(key) != value}
        if patch:
            self._patch_metadata(name, labels=patch)
            actions.append("%s: GFD labels %s" % (name, ", ".join(sorted(patch))))
        return actions

    def _advertise(self, node, resources):
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        stale = sorted({key for field in ("capacity", "allocatable") for key in (status.get(field) or {})
                        if key.startswith("nvidia.com/") and key not in resources})
        actions = []
        try:
            if resources:
                results = apply_node_resources(self._nodes, resources, names=[name])
                if any(result["changed"] for result in results):
                    actions.append("%s: advertises %s" % (name, json.dumps(resources, sort_keys=True)))
            if stale:
                apply_node_resources(self._nodes, stale, state="absent", names=[name])
                actions.append("%s: no longer advertises %s" % (name, ", ".join(stale)))
        except (NodeResourcesError, NodeWriteError) as exc:
            raise ApiCallError(None, "cannot write the status of %s: %s" % (name, exc)) from None
        return actions
