# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's MIG layouts survive the collection's mig-parted config (issue 41, item 4): which ConfigMap they come
from, that they are carried line for line, and that a layout name meaning two things stops the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.filter.gpu_operator import gpu_operator_mig_parted_source
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as op
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import operator_layouts as layouts

STOCK = (Path(__file__).resolve().parents[3] / "stock-mig-parted-config.yml").read_text()
A100_80 = "NVIDIA-A100-SXM4-80GB"
A100_40 = "NVIDIA-A100-SXM4-40GB"
OWN = "gpushare-mig-parted-config"
NS = "gpu-operator"
# What the README's example makes of the lab: a shared node, a node of the training pool (every GPU split into 1g.10gb),
# and a node listed by name with one of two GPUs split.
NODES = [
    {"name": "lab-node-1", "gpus": 2, "config": "shared"},
    {"name": "lab-node-2", "gpus": 2, "mig": {"product": A100_80, "profile": "1g.10gb"}},
    {"name": "lab-node-3", "gpus": 2, "mig": {"product": A100_80, "profile": "1g.10gb", "gpus": 1}},
]
PARTIAL = [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}, {"devices": [1], "mig-enabled": True, "mig-devices": {}}]


def policy(name=None):
    return {"spec": {"migManager": {"config": {"name": name, "default": "all-disabled"}}}} if name is not None else {"spec": {}}


def src(text=STOCK, name="default-mig-parted-config"):
    return {"name": name, "namespace": NS, "target": OWN, "text": text}


def mig_configs_lines(text):
    """The lines of a config's mig-configs block, as written (the stock file's: from the line after mig-configs: to the end)."""
    lines = text.splitlines()
    return lines[lines.index("mig-configs:") + 1:]


def test_the_stock_layouts_come_first_line_for_line_and_the_nodes_layouts_they_lack_follow():
    text = layouts.render(NODES, src())
    lines = text.splitlines()
    block = mig_configs_lines(STOCK)
    start = lines.index(block[0])
    assert lines[start:start + len(block)] == block, "the stock mig-configs block is not carried verbatim"
    # its comments keep their place: the product comment right above the entry it names
    assert "    # A100 40GB (SXM4 0x20B0, PCIe 0x20F1)\n    - device-filter: [\"0x20B010DE\", \"0x20F110DE\"]" in text
    assert lines[0].startswith("# Written by gpushare.k8s") and "ConfigMap gpu-operator/default-mig-parted-config" in text
    config = yaml.safe_load(text)
    stock = yaml.safe_load(STOCK)["mig-configs"]
    assert config["version"] == "v1"
    # every stock layout as the stock file has it (all-1g.10gb with its per-board entries, not the collection's own)
    assert {name: config["mig-configs"][name] for name in stock} == stock
    assert config["mig-configs"]["all-1g.10gb"][0]["device-filter"][0] == "0x20B210DE"
    # then what the stock config lacks: lab-node-3's layout, once
    assert set(config["mig-configs"]) - set(stock) == {"1g.10gb-x7-on-1-of-2"}
    assert config["mig-configs"]["1g.10gb-x7-on-1-of-2"] == PARTIAL
    assert text.index("# Added by gpushare.k8s") > text.index("all-balanced:")
    assert layouts.render(NODES, src()) == text, "the same nodes and source give the same text"
    assert op.parse_mig_parted(text) == config["mig-configs"]


def test_without_a_source_the_text_is_the_nodes_layouts_alone():
    assert layouts.render(NODES, None) == op.render_mig_parted(NODES)
    assert layouts.render(NODES, src(text=None)) == op.render_mig_parted(NODES)


def test_the_same_name_on_another_board_is_judged_by_that_boards_entry():
    """NVIDIA's all-1g.10gb gives an A100 40GB four instances (its second entry): what the collection's all-1g.10gb is there."""
    node = {"name": "n40", "gpus": 4, "mig": {"product": A100_40, "profile": "1g.10gb"}}
    assert op.node_layout(node) == ("all-1g.10gb", [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4}}])
    config = yaml.safe_load(layouts.render([node], src()))
    assert config["mig-configs"] == yaml.safe_load(STOCK)["mig-configs"]


@pytest.mark.parametrize("edit, node, have", [
    ('"1g.10gb": 7', NODES[1], "GPUs 0-1: MIG on, 3 x 1g.10gb"),
    ('["0x20B210DE", "0x20B510DE", "0x233010DE", "0x233110DE"]', NODES[1], "GPUs 0-1: left as it is (no entry selects it)"),
], ids=["other-count", "board-not-selected"])
def test_a_name_both_use_for_different_layouts_is_refused_naming_the_layout_both_configmaps_and_the_node(edit, node, have):
    changed = STOCK.replace(edit, '"1g.10gb": 3' if edit.startswith('"1g') else '["0x233010DE"]', 1)
    assert changed != STOCK
    with pytest.raises(op.OperatorError) as info:
        layouts.render(NODES, src(changed))
    message = str(info.value)
    assert message.startswith("ConfigMap gpu-operator/default-mig-parted-config config.yaml mig-configs.all-1g.10gb: ")
    assert "ConfigMap gpu-operator/gpushare-mig-parted-config must hold for node lab-node-2 (2 x %s, PCI device id 0x20b210de)" % A100_80 in message
    assert have in message and "the node needs GPUs 0-1: MIG on, 7 x 1g.10gb" in message
    assert "Fix: make all-1g.10gb in ConfigMap gpu-operator/default-mig-parted-config do the same on %s" % A100_80 in message


def test_all_disabled_is_checked_on_every_mig_node():
    changed = STOCK.replace("  all-disabled:\n    - devices: all\n      mig-enabled: false",
                            "  all-disabled:\n    - devices: [0]\n      mig-enabled: false", 1)
    with pytest.raises(op.OperatorError, match=r"mig-configs\.all-disabled: .*node lab-node-2 .*GPU 1: left as it is"):
        layouts.render(NODES, src(changed))
    # no MIG node: nobody is given all-disabled, the team's stays as it is
    assert "devices: [0]" in layouts.render(NODES[:1], src(changed))


@pytest.mark.parametrize("text, where, problem", [
    ("version: v1\nmig-configs: [oops\n", "config.yaml", "is not valid YAML"),
    ("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "config.yaml version", "is v2, not v1"),
    ("version: v1\nmig-configs: {}\n", "config.yaml mig-configs", "is not a mapping of at least one layout"),
    ("version: v1\nextra: 1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "config.yaml", "fields mig-parted does not know (extra)"),
    ("version: v1\nmig-configs: {a: []}\n", "config.yaml mig-configs.a", "is not a list of at least one entry"),
    ("version: v1\nmig-configs: {a: [{devices: all}]}\n", "config.yaml mig-configs.a[0]", "lacks mig-enabled"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, gpus: 1}]}\n", "config.yaml mig-configs.a[0]", "(gpus)"),
    ("version: v1\nmig-configs: {a: [{devices: some, mig-enabled: false}]}\n", "config.yaml mig-configs.a[0]", "devices is neither all"),
    # an unquoted id is a YAML integer, which mig-parted cannot read as a device filter
    ("version: v1\nmig-configs: {a: [{device-filter: 0x20B210DE, devices: all, mig-enabled: false}]}\n", "config.yaml mig-configs.a[0]",
     "device-filter is neither a PCI device id (text)"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}\n", "config.yaml mig-configs.a[0]", "mig-enabled is true without mig-devices"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}]}\n", "config.yaml mig-configs.a[0]",
     "mig-devices are given with mig-enabled false"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: -1}}]}\n", "config.yaml mig-configs.a[0]",
     "mig-devices is not a mapping of MIG profile to count"),
])
def test_a_config_mig_parted_would_refuse_is_refused_naming_the_field(text, where, problem):
    with pytest.raises(op.OperatorError) as info:
        layouts.render(NODES, src(text))
    message = str(info.value)
    assert message.startswith("ConfigMap gpu-operator/default-mig-parted-config " + where + ": "), message
    assert problem in message and "nvidia-mig-parted refuses the whole file" in message and "Fix: correct it in that ConfigMap" in message


def test_a_config_written_otherwise_is_carried_too():
    """mig-configs before version, a comment above it, layouts indented by four: the lines are still carried."""
    text = ("# the team's layouts\nmig-configs:\n    # ours\n    team-a:\n        - devices: all\n          mig-enabled: true\n"
            "          mig-devices: {\"3g.40gb\": 2}\n\n# the format\nversion: v1\n")
    out = layouts.render(NODES, src(text))
    assert "    # ours\n    team-a:\n        - devices: all\n" in out and "# the format" not in out
    config = yaml.safe_load(out)
    assert config["mig-configs"]["team-a"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    assert config["mig-configs"]["1g.10gb-x7-on-1-of-2"] == PARTIAL and config["mig-configs"]["all-1g.10gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert "copied line for line with their comments" in out


def test_a_flow_style_config_is_rewritten_saying_its_comments_are_lost():
    text = 'version: v1\nmig-configs: {team-a: [{devices: all, mig-enabled: false}]}  # one layout\n'
    out = layouts.render(NODES, src(text))
    assert "re-written, their comments lost" in out
    config = yaml.safe_load(out)
    assert set(config["mig-configs"]) == {"team-a", "all-disabled", "all-1g.10gb", "1g.10gb-x7-on-1-of-2"}


def test_the_source_is_what_the_clusterpolicy_named_before_the_collections():
    cms = {"default-mig-parted-config": {"config.yaml": STOCK}, "team-layouts": {"config.yaml": "version: v1\n"}, OWN: {"config.yaml": "x"}}
    # first run: what it names now; unset or empty: the operator's default-mig-parted-config
    assert layouts.source(policy("team-layouts"), cms, OWN, NS)["text"] == "version: v1\n"
    assert layouts.source(policy(), cms, OWN, NS)["name"] == "default-mig-parted-config"
    assert layouts.source(policy(""), cms, OWN, NS) == src()
    # a re-run (it names the collection's): the earlier name the record holds, never the collection's own output
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["migManager", "config", "name"], "team-layouts"]])["name"] == "team-layouts"
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["mig", "strategy"], "single"], [["migManager"], None]])["name"] == "default-mig-parted-config"
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["migManager", "config", "name"], ""]])["name"] == "default-mig-parted-config"
    # no field recorded (the team merged the collection's values into its Helm release by hand): what the collection's
    # ConfigMap says it carried; a name that is no ConfigMap name is not used
    assert layouts.source(policy(OWN), cms, OWN, NS, [], "team-layouts")["name"] == "team-layouts"
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["migManager", "config", "name"], ""]], "team-layouts")["name"] == "default-mig-parted-config"
    assert layouts.source(policy(OWN), cms, OWN, NS, None, "../x\n")["name"] == "default-mig-parted-config"
    # no record of an earlier name: the operator's own config when it is there, else nothing; the collection's own: nothing
    assert layouts.source(policy(OWN), cms, OWN, NS) == src()
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["mig", "strategy"], "single"]]) == src()
    assert layouts.source(policy(OWN), {OWN: {"config.yaml": "x"}}, OWN, NS) is None
    assert layouts.source(policy(OWN), cms, OWN, NS, [[["migManager", "config", "name"], OWN]]) is None
    # a ConfigMap that does not exist had no layouts serving a node
    assert layouts.source(policy("gone"), cms, OWN, NS) == {"name": "gone", "namespace": NS, "target": OWN, "text": None}


def test_what_the_cluster_holds_is_checked_before_it_is_used():
    with pytest.raises(op.OperatorError, match=r"^ClusterPolicy spec\.migManager\.config\.name: is int, not a ConfigMap name\. Fix: "):
        layouts.source({"spec": {"migManager": {"config": {"name": 7}}}}, {}, OWN, NS)
    with pytest.raises(op.OperatorError, match=r"^ConfigMap gpu-operator/team: has no key config\.yaml, where the MIG manager reads"):
        layouts.source(policy("team"), {"team": {"other.yaml": "x"}}, OWN, NS)


def test_the_filter_reads_the_earlier_name_from_the_record_text():
    record = json.dumps({"version": 1, "configmaps": {}, "nodes": {},
                         "policy": {"via": "patch", "fields": [[["migManager", "config", "name"], "default-mig-parted-config"]]}})
    configmaps = [{"metadata": {"name": "default-mig-parted-config"}, "data": {"config.yaml": STOCK}}]
    assert gpu_operator_mig_parted_source(configmaps, policy(OWN), OWN, NS, record.replace("default-mig-parted-config", "gone")) == src(None, "gone")
    assert gpu_operator_mig_parted_source(configmaps, policy(OWN), OWN, NS, record) == src()
    assert gpu_operator_mig_parted_source(configmaps[:0], policy(OWN), OWN, NS) == {}
    remembered = {"metadata": {"name": OWN, "annotations": {layouts.SOURCE_ANNOTATION: "team-layouts"}}, "data": {"config.yaml": "x"}}
    team = {"metadata": {"name": "team-layouts"}, "data": {"config.yaml": STOCK}}
    assert gpu_operator_mig_parted_source(configmaps + [remembered, team], policy(OWN), OWN, NS) == src(name="team-layouts")
    assert gpu_operator_mig_parted_source(configmaps, policy(), OWN, NS, None) == src()


def test_effect_follows_mig_parteds_walk():
    entries = yaml.safe_load(STOCK)["mig-configs"]["all-balanced"]
    a100 = layouts.effect(entries, 0x20B210DE, 2)
    assert a100 == [(True, (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)))] * 2
    assert layouts.effect(entries, 0x20B710DE, 1) == [(True, (("1g.6gb", 2), ("2g.12gb", 1)))]
    assert layouts.effect(entries, 0x12345678, 1) == [None]
    # a later entry over an earlier one; indices beyond the node's GPUs select nothing
    assert layouts.effect([{"devices": "all", "mig-enabled": False}, {"devices": [1, 5], "mig-enabled": True, "mig-devices": {}}],
                          1, 2) == [(False, ()), (True, ())]
