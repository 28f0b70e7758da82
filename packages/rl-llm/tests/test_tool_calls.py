"""ToolRegistry, ToolCall and the XML / JSON tool-call parsers (TorchRL's names and results)."""

from __future__ import annotations

import json

import pytest

from rl_llm import JSONCallParser, ToolCall, ToolRegistry, XMLBlockParser


class _Double:
    name, schema_in, schema_out = "double", {"x": int}, {"y": int}

    def __call__(self, x, **kwargs):
        return {"y": 2 * x}


def test_registry_register_get_contains_and_unknown():
    registry = ToolRegistry()
    assert "double" not in registry
    registry.register(_Double())
    assert "double" in registry and registry.get("double")(x=4) == {"y": 8}
    with pytest.raises(KeyError, match="Unknown tool: nope"):
        registry.get("nope")


def test_tool_call_defaults():
    assert ToolCall(tool="t", args={"a": 1}).tag is None
    assert ToolCall("t").args == {}


def test_xml_parser_blocks_in_order_text_cleaned():
    reply = 'Intro\n<tool name="a" tag="T">{"q": 1}</tool>\nmid\n<tool name="b"></tool>\nend'
    out = XMLBlockParser()(reply)
    assert [c.tool for c in out["calls"]] == ["a", "b"]
    assert out["calls"][0].tag == "T" and out["calls"][0].args == {"q": 1}
    assert out["calls"][1].args == {} and out["calls"][1].tag is None
    assert "<tool" not in out["text"] and "Intro" in out["text"] and "end" in out["text"]
    assert out["meta"] == {"count": 2}


@pytest.mark.parametrize("body", ["{not json}", "[1, 2]"])
def test_xml_parser_non_object_body_is_raw(body):
    call = XMLBlockParser()(f'<tool name="t">{body}</tool>')["calls"][0]
    assert call.args == {"raw": body}


def test_json_parser_dict_string_and_plain_text():
    reply = {"message": "m", "tools": [{"tool": "s", "args": {"q": "x"}, "tag": "T1"}]}
    for response in (reply, json.dumps(reply)):
        out = JSONCallParser()(response)
        assert out["text"] == "m" and out["calls"] == [ToolCall("s", {"q": "x"}, "T1")]
    assert JSONCallParser()("plain words") == {
        "text": "plain words",
        "calls": [],
        "meta": {"count": 0},
    }
    assert JSONCallParser()({"message": "only"})["calls"] == []
    with pytest.raises(ValueError, match="tools\\[0\\]"):
        JSONCallParser()({"tools": [{"args": {}}]})
