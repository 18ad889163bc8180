"""No-op mode: nothing supervises the process, and the same code runs."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from lightkube import ConfigError

from agent_supervisor import AsyncSupervisor, Supervisor


def test_every_call_is_a_no_op_said_once(laptop: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "agent_supervisor"), Supervisor.from_env() as sup:
        assert not sup.supervised
        assert (sup.checkpoint, sup.progress, sup.restart_count) == (None, None, 0)
        assert sup.last_failure_reason is None
        sup.report(progress=1, checkpoint="step-1")
        sup.report(spend={"cost": "0.10"})
    assert caplog.text.count("AGENT_HEARTBEAT_LEASE is not set") == 1


def test_bad_arguments_fail_on_a_laptop_too(laptop: Path) -> None:
    sup = Supervisor.from_env()
    sup.report(progress=5)
    with pytest.raises(ValueError, match="lower than the 5"):
        sup.report(progress=4)
    with pytest.raises(ValueError, match="not one of"):
        sup.shutdown("tired", "x")


def test_last_words_off_cluster_are_logged_not_written(
    laptop: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sup = Supervisor.from_env()
    with caplog.at_level(logging.INFO, "agent_supervisor"), pytest.raises(SystemExit) as exit:
        sup.shutdown("voluntary", "done")
    assert exit.value.code == 0
    assert '"shutdown":"voluntary"' in caplog.text
    assert not laptop.exists()


def test_last_words_go_where_agent_termination_log_says(
    laptop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TERMINATION_LOG", str(laptop))
    sup = Supervisor.from_env()
    sup.report(progress=3)
    with pytest.raises(SystemExit) as exit:
        sup.retry_after(90, "quota")
    assert exit.value.code == 1
    assert json.loads(laptop.read_text()) == {
        "retryAfter": "1m30s",
        "reason": "quota",
        "progress": 3,
    }


def test_in_a_pod_without_a_heartbeat_the_typed_channel_still_works(
    laptop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_POD_NAME", "agent-7-1")
    from agent_supervisor._env import DEFAULT_TERMINATION_LOG, Identity

    assert Identity.from_env().termination_log == DEFAULT_TERMINATION_LOG
    assert not Supervisor.from_env().supervised


def test_an_unwritable_termination_log_still_exits(
    laptop: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENT_TERMINATION_LOG", str(laptop / "no-such-dir" / "log"))
    with caplog.at_level(logging.WARNING, "agent_supervisor"), pytest.raises(SystemExit):
        Supervisor.from_env().shutdown("economic", "broke")
    assert "cannot write the termination message" in caplog.text


def test_the_async_twin_is_a_no_op_too(laptop: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env() as sup:
            await sup.report(progress=1)
            await sup.report(checkpoint="c")
            await sup.shutdown("voluntary", "done")

    with caplog.at_level(logging.INFO, "agent_supervisor"), pytest.raises(SystemExit) as exit:
        asyncio.run(agent())
    assert exit.value.code == 0
    assert caplog.text.count("AGENT_HEARTBEAT_LEASE is not set") == 1


def test_malformed_numbers_in_the_environment_are_ignored(
    laptop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_PROGRESS", "lots")
    monkeypatch.setenv("AGENT_RESTART_COUNT", "-2")
    sup = Supervisor.from_env()
    assert (sup.progress, sup.restart_count) == (None, 0)


def test_a_lease_without_a_cluster_says_what_to_do(
    laptop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_HEARTBEAT_LEASE", "agent-7")
    with pytest.raises(ConfigError, match="set KUBECONFIG, or unset AGENT_HEARTBEAT_LEASE"):
        Supervisor.from_env()
    with pytest.raises(ConfigError, match="automountServiceAccountToken"):
        AsyncSupervisor.from_env()
