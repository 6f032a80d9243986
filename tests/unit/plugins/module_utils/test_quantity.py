# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""quantity.py: the kubernetes client's parser, behind the API server's grammar and the whole-unit rules.

The API server itself is the reference in tests/integration/test_request_check_kubectl.py
(test_quantities_agree_with_the_api_server); here, the rules and the parser's provenance.
"""
from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest
from kubernetes.utils import parse_quantity as client_parse_quantity

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import check_request
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import quantity


def test_the_value_comes_from_the_kubernetes_client_s_parser(monkeypatch):
    assert quantity.HAS_PARSER
    assert quantity._parse.__code__.co_filename.endswith("kubernetes/utils/quantity.py")
    calls = []
    monkeypatch.setattr(quantity, "_parse", lambda text: calls.append(text) or Decimal(7))
    assert quantity.parse_quantity("1k") == 7 and calls == ["1k"]


@pytest.mark.parametrize("text", ["8", "0", "1k", "1Ki", "2Mi", "1500m", "1e3", "1E", "+3", ".5", "5.", "1n", "3Ei", "2e-0"])
def test_valid_quantities_read_as_the_client_reads_them(text):
    assert quantity.parse_quantity(text) == client_parse_quantity(text)


@pytest.mark.parametrize("text", ["1K", "1e3k", "NaN", "Infinity", "-inf", "1_000", "1ki", "0x10", "1.2.3", "e3", "", "k"])
def test_what_the_api_server_refuses_is_not_a_quantity(text):
    """The client's parser is lenient (Decimal's syntax, a K suffix, exponent and suffix together): the grammar is ours."""
    assert quantity.parse_quantity(text) is None
    assert quantity.whole_units(text) == (None, "not a quantity (the API server refuses it)")


def test_the_client_parser_alone_would_take_some_of_them():
    assert client_parse_quantity("1K") == 1000 and client_parse_quantity("1e3k") == 1000000
    assert client_parse_quantity("1_000") == 1000 and client_parse_quantity("NaN").is_nan()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2000m", (2, None)),
        ("2e0", (2, None)),
        ("1k", (1000, None)),
        ("2.0", (2, None)),
        (" 3 ", (3, None)),
        ("1000000000n", (1, None)),
        ("1000000001n", (None, "not a whole number (extended resources are requested in whole units)")),
        ("0.0000000001", (None, "not a whole number (extended resources are requested in whole units)")),  # up to 1n
        ("1500m", (None, "not a whole number (extended resources are requested in whole units)")),
        ("-1", (None, "negative (the API server refuses it)")),
        ("1e101", (None, "not a count the API server holds")),
        ("1e-101", (None, "not a count the API server holds")),
        ("9" * 65, (None, "longer than 64 characters, not a count the API server holds")),
        ("9" * 5000, (None, "longer than 64 characters, not a count the API server holds")),
        ("1" + "0" * 30, (None, "larger than %d units (the API server cannot check it as a whole number)" % quantity.MAX_COUNT)),
        # beyond Python's default 28 digits: 1000.0000000000000000000000001 is not whole
        ("1.0000000000000000000000000001k", (None, "not a whole number (extended resources are requested in whole units)")),
        ("0.9999999999999999999999999999999k", (1000, None)),  # rounded up to the nano
    ],
)
def test_whole_units(text, expected):
    assert quantity.whole_units(text) == expected


@pytest.mark.parametrize("value, expected", [(8, Decimal(8)), (True, None), (None, None), (1.5, None), (["1"], None)])
def test_parse_quantity_takes_ints_and_strings_only(value, expected):
    assert quantity.parse_quantity(value) == expected


def test_the_client_package_is_not_imported_as_a_whole():
    """Loading the parser costs no import of the kubernetes client (bin/check-request.sh stays fast)."""
    code = "import sys; sys.path[:0] = %r; import quantity; print(quantity.HAS_PARSER, 'kubernetes' in sys.modules)" % [
        str(__import__("pathlib").Path(quantity.__file__).parent)
    ]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def test_without_the_kubernetes_package_the_check_says_so_and_checks_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(check_request, "HAS_PARSER", False)
    monkeypatch.setattr(check_request, "PARSER_IMPORT_ERROR", "ModuleNotFoundError: No module named 'kubernetes'\n")
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n")
    assert check_request.main([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "install kubernetes (pip install kubernetes), nothing was checked" in captured.err
    assert "No module named 'kubernetes'" in captured.err
