"""A container's state is parsed once, where docker's output is read, into ``ContainerState``: known
words become their member, any other word the explicit ``UNKNOWN`` (never a crash), and the JSON
the console writes keeps docker's exact spelling."""

from __future__ import annotations

import json

import pytest

from console import json_out
from console.incidents.replay import message as message_of
from console.probes.docker import parse_inspect
from console.probes.docker_env import parse_inspect_json
from console.station.messages import ContainerUpdate
from console.vocabulary import CONTAINER_ENDED_STATES, CONTAINER_UP_STATES, ContainerState


def _inspect(status: str) -> str:
    return (json.dumps({"Status": status, "Running": False, "OOMKilled": False, "ExitCode": 0,
                        "StartedAt": "2026-11-30T14:10:14.548831000Z", "FinishedAt": "0001-01-01T00:00:00Z"})
            + "|vllm/vllm-openai:v0.30.0|sha256:4c68")


@pytest.mark.parametrize("word", ["created", "running", "paused", "restarting", "removing", "exited", "dead"])
def test_every_docker_state_word_parses_to_its_member(word):
    info = parse_inspect("glm53", _inspect(word))
    assert type(info.state) is ContainerState and info.state.value == word


def test_unknown_docker_state_word_is_unknown_not_a_crash():
    info = parse_inspect("glm53", _inspect("hibernating"))  # a word a newer docker might add
    assert info.state is ContainerState.UNKNOWN
    assert info.state not in CONTAINER_UP_STATES and info.state not in CONTAINER_ENDED_STATES
    assert info.image == "vllm/vllm-openai:v0.30.0"  # the rest of the answer is still read
    assert parse_inspect("glm53", _inspect("RUNNING")).state is ContainerState.RUNNING  # docker's case is not ours


def test_missing_container_is_absent():
    assert parse_inspect("glm53", "Error: No such object: glm53", exit_status=1).state is ContainerState.ABSENT


def test_workbench_inspect_parses_state_the_same_way():
    text = json.dumps([{"Name": "/glm53", "State": {"Status": "frozen", "ExitCode": 0}, "Config": {}, "Image": ""}])
    rt = parse_inspect_json("glm53", text)
    assert rt is not None and rt.state is ContainerState.UNKNOWN and not rt.running
    text = json.dumps([{"Name": "/glm53", "State": {"Status": "running"}, "Config": {}, "Image": ""}])
    rt = parse_inspect_json("glm53", text)
    assert rt is not None and rt.state is ContainerState.RUNNING and rt.running


def test_json_keeps_docker_spelling_byte_for_byte():
    info = parse_inspect("glm53", _inspect("exited"))
    doc = {"container": {"name": info.name, "state": info.state}, info.state: 1}
    assert json_out.dumps(doc) == json.dumps({"container": {"name": "glm53", "state": "exited"}, "exited": 1})
    assert f"container {info.state}" == "container exited"  # the words on screen too


def test_replayed_sample_state_is_parsed_too():
    msg = message_of({"station": "spark-1", "t": 1.0, "kind": "container", "state": "exited", "exit_code": 1})
    assert isinstance(msg, ContainerUpdate) and msg.info.state is ContainerState.EXITED
    msg = message_of({"station": "spark-1", "t": 1.0, "kind": "container", "state": "sideways"})
    assert isinstance(msg, ContainerUpdate) and msg.info.state is ContainerState.UNKNOWN
