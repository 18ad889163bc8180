"""The tests run against the installed wheel, and the wheel is what a user gets."""

from __future__ import annotations

import importlib
import json
import sys
from importlib import metadata, resources
from pathlib import Path

import pytest

import agent_supervisor

SOURCE = Path(__file__).resolve().parents[1] / "src"
REPO = Path(__file__).resolve().parents[3]


def test_the_wheel_is_what_is_tested_unless_installed_editable() -> None:
    origin = json.loads(
        metadata.distribution("agent-supervisor").read_text("direct_url.json") or "{}"
    )
    installed = Path(agent_supervisor.__file__).resolve()
    editable = origin.get("dir_info", {}).get("editable", False)
    assert (SOURCE in installed.parents) == editable, "hack/sdk.sh tests the built wheel"


def test_the_wheel_is_typed_and_complete() -> None:
    files = resources.files("agent_supervisor")
    assert files.joinpath("py.typed").is_file()
    assert files.joinpath("langgraph.py").is_file()
    assert files.joinpath("langchain.py").is_file()
    dist = metadata.distribution("agent-supervisor")
    assert dist.version == agent_supervisor.__version__
    assert dist.metadata["Requires-Python"] == ">=3.10"
    requires = dist.requires or []
    assert [r for r in requires if "extra" not in r] == ["lightkube<2,>=1.0.1"]
    assert any(r.startswith("langgraph") and "extra == 'langgraph'" in r for r in requires)
    assert any(
        r.startswith("langgraph-checkpoint-sqlite") and "extra == 'langgraph'" in r
        for r in requires
    ), "the README's LangGraph snippet imports langgraph.checkpoint.sqlite"
    assert any(r.startswith("langchain-core") and "extra == 'langchain'" in r for r in requires)


def test_the_wheel_ships_the_license_it_names() -> None:
    dist = metadata.distribution("agent-supervisor")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    shipped = [f for f in dist.files or [] if f.name == "LICENSE"]
    assert shipped, "the wheel has no LICENSE"
    text = shipped[0].read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert (REPO / "LICENSE").read_text() == text, "the SDK's LICENSE is the repository's"


@pytest.mark.parametrize(
    ("module", "needs", "extra"),
    [
        ("agent_supervisor.langgraph", "langgraph.checkpoint.base", "langgraph"),
        ("agent_supervisor.langchain", "langchain_core.callbacks", "langchain"),
    ],
)
def test_an_adapter_without_its_extra_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, needs: str, extra: str
) -> None:
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, needs, None)  # as if not installed
    with pytest.raises(ImportError, match=rf"pip install 'agent-supervisor\[{extra}\]'"):
        importlib.import_module(module)
