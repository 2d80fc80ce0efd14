"""The fixtures the official MCP conformance suite expects, declared through mcp_expose's public API.

Enabled only by tests/settings_conformance.py. Names, texts and shapes follow the suite's scenario
descriptions (`@modelcontextprotocol/conformance`); nothing here is special-cased in mcp_expose. One tool is this
project's own, not the suite's: `test_sync_input_required_result_multi_round`, the multi-round fixture as a sync
tool, so that tests/test_asking.py shows `ask_sync` in both eras.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Annotated, Any

from django.db import transaction
from pydantic import Field

import mcp_expose
from mcp_expose import (
    Audio,
    Elicit,
    EmbeddedResource,
    Image,
    InvocationContext,
    ListRoots,
    Sample,
    Text,
    ToolError,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _form(field: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


def _accepted(answer: Any, field: str, default: str = "") -> str:
    return str((answer.content or {}).get(field, default)) if answer.action == "accept" else default


def _sampled_text(answer: Any) -> str:
    content = answer.content
    return content.text if getattr(content, "type", None) == "text" else ""


def _content_json(answer: Any) -> str:
    return json.dumps(answer.content, separators=(", ", ": ")) if answer.action == "accept" else "{}"


async def _greet(context: InvocationContext) -> Text:
    answer = (await context.ask({"user_name": Elicit("What is your name?", NAME_FORM)}))["user_name"]
    return Text(f"Hello, {_accepted(answer, 'name', 'stranger')}!")


# Content results


@mcp_expose.tool(name="test_simple_text", read_only=True)
def simple_text() -> Text:
    """A single text block."""
    return Text("This is a simple text response for testing.")


@mcp_expose.tool(name="test_image_content", read_only=True)
def image_content() -> Image:
    """A single PNG image."""
    return Image(PNG, "image/png")


@mcp_expose.tool(name="test_audio_content", read_only=True)
def audio_content() -> Audio:
    """A single WAV clip."""
    return Audio(WAV, "audio/wav")


@mcp_expose.tool(name="test_embedded_resource", read_only=True)
def embedded_resource() -> EmbeddedResource:
    """A resource carried inside the result."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@mcp_expose.tool(name="test_multiple_content_types", read_only=True)
def multiple_content_types() -> list[Any]:
    """Text, an image and an embedded resource in one result."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"
        ),
    ]


@mcp_expose.tool(name="test_error_handling", read_only=True)
def error_handling() -> str:
    """Always fails: the result is an error the model can read."""
    raise mcp_expose.ToolError("This tool intentionally returns an error for testing")


# Progress, logging, streams


@mcp_expose.tool(name="test_tool_with_progress", read_only=True)
async def tool_with_progress(context: InvocationContext) -> Text:
    """Reports progress three times."""
    for step in (0, 50, 100):
        await context.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await asyncio.sleep(0.05)
    return Text("Progress reported")


@mcp_expose.tool(name="test_tool_with_logging", read_only=True)
async def tool_with_logging(context: InvocationContext) -> Text:
    """Sends three log messages while it works."""
    await context.log("info", "Tool execution started")
    await asyncio.sleep(0.05)
    await context.log("info", "Tool processing data")
    await asyncio.sleep(0.05)
    await context.log("info", "Tool execution completed")
    return Text("Tool with logging executed successfully")


@mcp_expose.tool(name="test_logging_tool", read_only=True)
async def logging_tool(context: InvocationContext) -> Text:
    """Logs at info: on 2026-07-28 the client sees it only when its request asked for a log level."""
    await context.log("info", "test_logging_tool ran")
    return Text("Logged once")


@mcp_expose.tool(name="test_reconnection", read_only=True)
async def reconnection(context: InvocationContext) -> Text:
    """Closes its stream mid-call; a polling client reconnects and still gets the end."""
    await context.log("info", "Before disconnect")
    await context.close_stream()
    await asyncio.sleep(0.2)
    await context.log("info", "After reconnect")
    return Text("Reconnection test completed")


# Asking the client (2025-11-25 back-channel and 2026-07-28 input_required alike)


@mcp_expose.tool(name="test_sampling", read_only=True)
async def sampling(prompt: str, context: InvocationContext) -> Text:
    """Asks the client's model."""
    answers = await context.ask({"completion": Sample(prompt, max_tokens=100)})
    return Text(f"LLM response: {_sampled_text(answers['completion'])}")


@mcp_expose.tool(name="test_elicitation", read_only=True)
async def elicitation(message: str, context: InvocationContext) -> Text:
    """Asks the user for a response."""
    form = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    answer = (await context.ask({"response": Elicit(message, form)}))["response"]
    return Text(f"User response: action={answer.action}, content={_content_json(answer)}")


@mcp_expose.tool(name="test_elicitation_sep1034_defaults", read_only=True)
async def elicitation_defaults(context: InvocationContext) -> Text:
    """A form whose every field has a default (SEP-1034)."""
    form = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    answer = (await context.ask({"info": Elicit("Please provide user information", form)}))["info"]
    return Text(f"Elicitation result: action={answer.action}, content={_content_json(answer)}")


@mcp_expose.tool(name="test_elicitation_sep1330_enums", read_only=True)
async def elicitation_enums(context: InvocationContext) -> Text:
    """A form with every enum style (SEP-1330)."""
    form = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Simple enum without titles",
                "enum": ["active", "inactive", "pending"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Enum with titled options (oneOf)",
                "oneOf": [
                    {"const": "low", "title": "Low Priority"},
                    {"const": "medium", "title": "Medium Priority"},
                    {"const": "high", "title": "High Priority"},
                ],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Multi-select without titles",
                "items": {"type": "string", "enum": ["read", "write", "execute"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Multi-select with titled options",
                "items": {
                    "anyOf": [
                        {"const": "feature", "title": "New Feature"},
                        {"const": "bug", "title": "Bug Fix"},
                        {"const": "docs", "title": "Documentation"},
                    ]
                },
            },
            "legacyEnum": {
                "type": "string",
                "description": "Legacy enum with enumNames",
                "enum": ["small", "medium", "large"],
                "enumNames": ["Small Size", "Medium Size", "Large Size"],
            },
        },
        "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
    }
    message = "Please select values using different enum schema types"
    answer = (await context.ask({"choices": Elicit(message, form)}))["choices"]
    return Text(f"Elicitation completed: action={answer.action}, content={_content_json(answer)}")


@mcp_expose.tool(name="test_input_required_result_elicitation", read_only=True)
async def input_elicitation(context: InvocationContext) -> Text:
    """Asks the user's name, then greets them."""
    return await _greet(context)


@mcp_expose.tool(name="test_input_required_result_sampling", read_only=True)
async def input_sampling(context: InvocationContext) -> Text:
    """Asks the client's model a question."""
    answers = await context.ask({"capital_question": Sample("What is the capital of France?", max_tokens=100)})
    return Text(f"The model said: {_sampled_text(answers['capital_question'])}")


@mcp_expose.tool(name="test_input_required_result_list_roots", read_only=True)
async def input_list_roots(context: InvocationContext) -> Text:
    """Asks for the client's roots and names them."""
    roots = (await context.ask({"client_roots": ListRoots()}))["client_roots"].roots
    return Text("Roots: " + ", ".join(f"{root.name or ''} ({root.uri})" for root in roots))


@mcp_expose.tool(name="test_input_required_result_request_state", read_only=True)
async def input_request_state(context: InvocationContext) -> Text:
    """The answer arrives with the sealed state; a state that fails its check never gets this far."""
    answer = (await context.ask({"confirm": Elicit("Please confirm", _form("ok", "boolean"))}))["confirm"]
    return Text(f"state-ok: confirmed={_accepted(answer, 'ok', 'False')}")


@mcp_expose.tool(name="test_input_required_result_multiple_inputs", read_only=True)
async def input_multiple(context: InvocationContext) -> Text:
    """Asks three things at once: a form, a completion and the roots."""
    answers = await context.ask(
        {
            "user_name": Elicit("What is your name?", NAME_FORM),
            "greeting": Sample("Generate a greeting", max_tokens=50),
            "client_roots": ListRoots(),
        }
    )
    name = _accepted(answers["user_name"], "name", "stranger")
    return Text(f"{_sampled_text(answers['greeting'])} {name}, with {len(answers['client_roots'].roots)} roots")


@mcp_expose.tool(name="test_input_required_result_multi_round", read_only=True)
async def input_multi_round(context: InvocationContext) -> Text:
    """Asks twice in a row; the second question comes only after the first answer."""
    name = (await context.ask({"step1": Elicit("Step 1: What is your name?", NAME_FORM)}))["step1"]
    color = (await context.ask({"step2": Elicit("Step 2: What is your favorite color?", _form("color"))}))["step2"]
    return Text(f"{_accepted(name, 'name')} likes {_accepted(color, 'color')}")


@mcp_expose.tool(name="test_sync_input_required_result_multi_round", read_only=True)
def sync_input_multi_round(context: InvocationContext) -> Text:
    """Asks twice in a row from a sync tool (`ask_sync`); the second question comes only after the first answer."""
    name = context.ask_sync({"step1": Elicit("Step 1: What is your name?", NAME_FORM)})["step1"]
    color = context.ask_sync({"step2": Elicit("Step 2: What is your favorite color?", _form("color"))})["step2"]
    return Text(f"{_accepted(name, 'name')} likes {_accepted(color, 'color')}, asked in sync")


@mcp_expose.tool(name="test_input_required_result_tampered_state", read_only=True)
async def input_tampered_state(context: InvocationContext) -> Text:
    """Asks once; a request state altered by the client is refused."""
    return await _greet(context)


@mcp_expose.tool(name="test_input_required_result_capabilities", read_only=True)
async def input_capabilities(context: InvocationContext) -> Text:
    """Asks only what the client declared it can answer."""
    wanted = {"user_name": Elicit("What is your name?", NAME_FORM), "greeting": Sample("Say hello", max_tokens=20)}
    answers = await context.ask({key: question for key, question in wanted.items() if context.can_ask(question)})
    return Text(f"Asked {', '.join(sorted(answers)) or 'nothing'}")


@mcp_expose.tool(name="test_missing_capability", read_only=True)
async def missing_capability(context: InvocationContext) -> Text:
    """Needs sampling whether or not the client declared it: undeclared, the call is refused (-32021)."""
    answers = await context.ask({"completion": Sample("Say hello", max_tokens=20)})
    return Text(_sampled_text(answers["completion"]))


@mcp_expose.tool(name="test_streaming_elicitation", read_only=True)
async def streaming_elicitation(context: InvocationContext) -> Text:
    """Asks the user's name (on 2026-07-28 as an input_required result, never a request on the stream)."""
    return await _greet(context)


# List changes: each call flips a real exposure row, as an administrator would.


@mcp_expose.tool(name="test_toggled_tool", read_only=True)
def toggled_tool() -> Text:
    """Switched on and off by test_trigger_tool_change."""
    return Text("Still here")


@mcp_expose.prompt(name="test_toggled_prompt")
def toggled_prompt() -> str:
    """Switched on and off by test_trigger_prompt_change."""
    return "Still here"


def _flip(key: str) -> None:
    from mcp_expose.models import ExposedTool

    with transaction.atomic():
        row = ExposedTool.objects.select_for_update().get(key=key)
        row.enabled = not row.enabled
        row.save()


@mcp_expose.tool(name="test_trigger_tool_change", read_only=False, destructive=False)
def trigger_tool_change() -> Text:
    """Switches test_toggled_tool on or off, so listeners hear that the tool list changed."""
    _flip("conformance.toggled_tool")
    return Text("The tool list changed")


@mcp_expose.tool(name="test_trigger_prompt_change", read_only=False, destructive=False)
def trigger_prompt_change() -> Text:
    """Switches test_toggled_prompt on or off, so listeners hear that the prompt list changed."""
    _flip("conformance.toggled_prompt")
    return Text("The prompt list changed")


@mcp_expose.tool(name="test_custom_header", read_only=True)
def custom_header(
    region: Annotated[
        str,
        Field(description="Also sent as the Mcp-Param-Region header.", json_schema_extra={"x-mcp-header": "Region"}),
    ],
) -> Text:
    """A parameter mirrored into an HTTP header (SEP-2243), which the server checks against the body."""
    return Text(f"Region {region}")


@mcp_expose.tool(name="test_touch_watched_resource", read_only=True)
def touch_watched_resource() -> Text:
    """Tells subscribers that test://watched-resource changed."""
    mcp_expose.resource_updated("test://watched-resource")
    return Text("Subscribers were told")


# A schema type hints cannot say


@mcp_expose.tool(
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    read_only=True,
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    },
)
def json_schema_2020_12(**arguments: Any) -> dict[str, Any]:
    """Echoes arguments validated against a JSON Schema 2020-12 input schema."""
    return {"received": arguments}


# Resources


@mcp_expose.resource("test://static-text", name="static_text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp_expose.resource("test://static-binary", name="static_binary", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@mcp_expose.resource("test://template/{id}/data", name="template_data", mime_type="application/json")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp_expose.resource("test://watched-resource", name="watched_resource", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


# Prompts


@mcp_expose.prompt(name="test_simple_prompt")
def simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp_expose.prompt(name="test_prompt_with_arguments", completions={"arg1": ["paris", "park", "party"]})
def prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp_expose.prompt(name="test_prompt_with_embedded_resource")
def prompt_with_embedded_resource(resourceUri: str) -> list[Any]:  # noqa: N803  (the suite's argument name)
    """A prompt that includes an embedded resource."""
    return [
        EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"),
        "Please process the embedded resource above.",
    ]


@mcp_expose.prompt(name="test_prompt_with_image")
def prompt_with_image() -> list[Any]:
    """A prompt that includes an image."""
    return [Image(PNG, "image/png"), "Please analyze the image above."]


@mcp_expose.prompt(name="test_input_required_result_prompt")
async def input_required_prompt(context: InvocationContext) -> str:
    """Asks the client for context before it is written."""
    question = Elicit("What context should the prompt use?", _form("context"))
    answer = (await context.ask({"user_context": question}))["user_context"]
    return f"Write with this context in mind: {_accepted(answer, 'context', 'none given')}"


# Tasks (SEP-2663): the fixtures the suite's tasks-* scenarios name.


@mcp_expose.tool(name="greet", read_only=True)
def greet(name: str) -> Text:
    """Greets by name, directly (never a task)."""
    return Text(f"Hello, {name}!")


@mcp_expose.tool(name="slow_compute", read_only=True, task="optional", timeout=120)
async def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=120)], context: InvocationContext, label: str = ""
) -> Text:
    """Works for `seconds` seconds, then answers; a task for clients that support them (cancelled at once)."""
    await context.report_progress(0, seconds or None, f"computing {label}".strip())
    await asyncio.sleep(seconds)
    return Text(f"Computed {label or 'the answer'} in {seconds:g} seconds.")


@mcp_expose.tool(name="failing_job", read_only=True, task="required")
async def failing_job() -> Text:
    """Runs only as a task, and ends with a tool error after a second."""
    await asyncio.sleep(1)
    raise ToolError("The job failed, as it always does.")


@mcp_expose.tool(name="protocol_error_job", read_only=True, task="optional")
async def protocol_error_job(context: InvocationContext) -> Text:
    """Ends in a protocol error: it asks for the client's roots, which the suite's task clients never declare
    (a direct call answers -32021; its task fails with that error)."""
    roots = (await context.ask({"roots": ListRoots()}))["roots"].roots
    return Text(f"{len(roots)} roots")


@mcp_expose.tool(name="confirm_delete", read_only=True, task="optional")
async def confirm_delete(filename: str, context: InvocationContext) -> Text:
    """Asks the user to confirm, then 'deletes' the file (a task waits for the answer as input_required)."""
    answer = (await context.ask({"confirm": Elicit(f"Delete {filename}?", _form("confirm", "boolean"))}))["confirm"]
    return Text(f"Deleted {filename}." if _accepted(answer, "confirm") == "True" else f"Kept {filename}.")


@mcp_expose.tool(name="multi_input", read_only=True, task="optional")
async def multi_input(context: InvocationContext) -> Text:
    """Asks two questions at once, answerable one at a time."""
    answers = await context.ask(
        {
            "name": Elicit("What is your name?", NAME_FORM),
            "confirm": Elicit("Shall I go on?", _form("confirm", "boolean")),
        }
    )
    return Text(
        f"Hello, {_accepted(answers['name'], 'name', 'stranger')} (go on: {_accepted(answers['confirm'], 'confirm')})."
    )


@mcp_expose.tool(name="test_tool_with_task", read_only=True, task="required", task_starts_in_call=True)
async def tool_with_task(context: InvocationContext) -> Text:
    """Asks the user's name in the call's own rounds, then goes on as a task that greets them."""
    answer = (await context.ask({"user_name": Elicit("What is your name?", NAME_FORM)}))["user_name"]
    context.continue_as_task()
    return Text(f"Hello, {_accepted(answer, 'name', 'stranger')}, from a task!")
