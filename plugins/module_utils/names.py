# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The names NVIDIA's components give the node labels and extended resources the collection reads and writes: one
home for them, which the other module_utils import (their own constants of the same names are these).

It also holds the one spelling of Kubernetes' DNS name rules the validators share. No Ansible import and no
import of the collection: every module, loaded in any way, can read it.
"""

from __future__ import annotations

import re

__all__ = ["PREFIX", "GPU_RESOURCE", "CONFIG_LABEL", "MIG_CONFIG_LABEL", "MIG_STATE_LABEL", "PRODUCT_LABEL", "MIG_STRATEGY_LABEL",
           "COUNT_LABEL", "PRESENT_LABEL", "OPERATOR_OWNED_LABELS", "KWOK_NODE_ANNOTATION", "HARDWARE_GPUS_ANNOTATION", "HARDWARE_PRODUCT_ANNOTATION",
           "DNS_LABEL_RE", "DNS_SUBDOMAIN_RE", "LABEL_NAME_RE", "LABEL_VALUE_RE"]

# NVIDIA's prefix of every label GFD writes and every resource the device plugin advertises.
PREFIX = "nvidia.com/"
# The whole-GPU resource (time-sliced or MPS slots under a shared config; MIG devices under the single strategy).
GPU_RESOURCE = "nvidia.com/gpu"
# The node label NVIDIA's config-manager follows: the key of the device-plugin ConfigMap the node runs.
CONFIG_LABEL = "nvidia.com/device-plugin.config"
# The node label NVIDIA's MIG manager follows (a layout of the mig-parted config) and the one it reports on.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
# GFD's product label (``-SHARED`` appended under a shared config) and its MIG strategy label.
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
# GFD's count of a node's GPUs, and the label the GPU Operator's node feature rules put on a node with NVIDIA GPUs.
COUNT_LABEL = "nvidia.com/gpu.count"
PRESENT_LABEL = "nvidia.com/gpu.present"
# The labels the configure-only role writes on a GPU Operator cluster (and its undo gives back).
OPERATOR_OWNED_LABELS = (CONFIG_LABEL, MIG_CONFIG_LABEL, MIG_STATE_LABEL)
# kwok's annotation on the nodes it fakes (the lab cluster's GPU nodes).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# The simulated GPUs of a lab cluster node (count, product), written when the lab cluster creates it: what the
# GPU Operator stand-in's node side and the lab's node pools read as the node's hardware.
HARDWARE_GPUS_ANNOTATION = "gpushare.k8s/gpus"
HARDWARE_PRODUCT_ANNOTATION = "gpushare.k8s/gpu-product"

# Kubernetes' DNS-1123 label (a namespace, a container name; at most 63 characters, checked by the caller) and
# subdomain (an object name, a label prefix; at most 253). Use them with fullmatch.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL_RE = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN_RE = re.compile(r"%s(\.%s)*" % (_DNS_LABEL, _DNS_LABEL))
# The name part of a label key or resource name, a label value that may not be empty, a ConfigMap key or name of
# the device plugin's (at most 63 characters, checked by the caller).
LABEL_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# A label value (at most 63 characters, checked by the caller; empty allowed).
LABEL_VALUE_RE = re.compile(r"(%s)?" % LABEL_NAME_RE.pattern)
