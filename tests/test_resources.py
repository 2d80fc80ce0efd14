"""Resources, prompts, completion and rich tool results: declared like tools, governed by the same rows and policy."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from mcp import MCPError

import mcp_expose
from mcp_expose.calls.reading import ReadFailed, UnknownPrompt, UnknownResource, complete, get_prompt, read_resource
from mcp_expose.catalog.compiled import compile_catalog, provider
from mcp_expose.core.errors import DeclarationError, InvalidInput
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ExposedTool
from project.library.mcp import COVER_PNG
from project.library.models import Book
from project.library.seed import seed_library

from .live import LiveServer
from .mcp_client import MODES, connect

READER = Principal(user=AnonymousUser(), scopes=frozenset({"mcp", "library:read"}), method="local")
NOBODY = Principal(user=AnonymousUser(), scopes=frozenset({"mcp"}), method="local")


def run(function: Any, *args: Any, **kwargs: Any) -> Any:
    return async_to_sync(function)(*args, **kwargs)


def test_declarations_are_checked(registry: CapabilityRegistry) -> None:
    def other_name(other: int) -> str:
        return ""

    def one_more(id: int, extra: str) -> str:
        return ""

    with pytest.raises(DeclarationError, match=r"\['other'\] must be exactly the URI template's variables \['id'\]"):
        mcp_expose.resource("app://things/{id}", registry=registry, key="t.r")(other_name)
    with pytest.raises(DeclarationError, match=r"\['extra', 'id'\]"):
        mcp_expose.resource("app://things/{id}", registry=registry, key="t.r")(one_more)
    with pytest.raises(DeclarationError, match="not a valid URI template"):
        mcp_expose.resource("app://things/{id", registry=registry, key="t.r")

    def numeric(count: int) -> str:
        return ""

    with pytest.raises(DeclarationError, match="must be a str"):
        mcp_expose.prompt(registry=registry, key="t.p")(numeric)


@pytest.mark.django_db(transaction=True)
def test_reading_fixed_templated_and_binary_resources() -> None:
    seed_library()
    cosmos = Book.objects.get(title="Cosmos").pk
    catalog = provider.get_sync()
    entry, record = run(read_resource, catalog, READER, f"library://books/{cosmos}")
    assert entry.name == "library.book_record" and record["title"] == "Cosmos"
    _, cover = run(read_resource, catalog, READER, f"library://covers/{cosmos}")
    assert cover == COVER_PNG
    _, page = run(read_resource, catalog, READER, "library://catalogue")
    assert page.startswith("Books\n") and "Cosmos by Carl Sagan" in page
    with pytest.raises(ReadFailed) as missing:
        run(read_resource, catalog, READER, "library://books/999999")
    assert missing.value.failure.code == "not_found"
    with pytest.raises(InvalidInput):
        run(read_resource, catalog, READER, "library://books/not-a-number")
    with pytest.raises(UnknownResource):
        run(read_resource, catalog, READER, "library://nothing")
    with pytest.raises(UnknownResource):  # hidden from a caller without the scope, exactly like unknown
        run(read_resource, catalog, NOBODY, f"library://books/{cosmos}")


@pytest.mark.django_db(transaction=True)
def test_a_disabled_resource_is_gone() -> None:
    ExposedTool.objects.filter(key="library.book_record").update(enabled=False)
    catalog = compile_catalog(provider.registry, provider._load_rows())
    with pytest.raises(UnknownResource):
        run(read_resource, catalog, READER, "library://books/1")


@pytest.mark.django_db(transaction=True)
def test_prompts_and_completion() -> None:
    seed_library()
    catalog = provider.get_sync()
    entry, messages = run(get_prompt, catalog, READER, "library.recommend", {"genre": "science", "mood": "cosy"})
    assert [m.role for m in messages] == ["user", "assistant"]
    assert "I feel cosy" in messages[0].text and "Cosmos, Pale Blue Dot, Silent Spring" in messages[1].text
    with pytest.raises(InvalidInput):
        run(get_prompt, catalog, READER, "library.recommend", {})
    with pytest.raises(UnknownPrompt):
        run(get_prompt, catalog, NOBODY, "library.recommend", {"genre": "science"})
    assert run(complete, catalog, READER, prompt="library.recommend", uri=None, argument="genre", prefix="s") == (
        ["science"],
        1,
    )
    assert run(complete, catalog, READER, prompt="library.recommend", uri=None, argument="mood", prefix="C") == (
        ["cosy", "curious"],
        2,
    )
    assert run(complete, catalog, READER, prompt="library.recommend", uri=None, argument="unknown", prefix="") == (
        [],
        0,
    )
    assert run(complete, catalog, NOBODY, prompt="library.recommend", uri=None, argument="mood", prefix="") == ([], 0)


@pytest.mark.django_db(transaction=True)
def test_a_prompt_may_put_an_image_in_any_of_its_message_forms(registry: CapabilityRegistry) -> None:
    from decimal import Decimal

    from mcp_expose import Image, Text

    cover = mcp_expose.Image(COVER_PNG)

    @mcp_expose.prompt(key="t.cover", registry=registry)
    def describe_cover() -> list[Any]:
        """Ask about a cover."""
        return [
            ("user", cover),
            {"role": "assistant", "content": Text("A blue cover.")},
            "And the price?",
            ("assistant", Decimal("12.50")),
            Image(b"GIF89a", "image/gif"),
        ]

    catalog = compile_catalog(list(registry), {})
    _entry, messages = run(get_prompt, catalog, READER, "t.cover", {})
    assert [(m.role, m.content) for m in messages] == [
        ("user", cover),
        ("assistant", "A blue cover."),
        ("user", "And the price?"),
        ("assistant", "12.50"),
        ("user", Image(b"GIF89a", "image/gif")),
    ]

    @mcp_expose.prompt(key="t.bad_role", registry=registry)
    def bad_role() -> list[Any]:
        """Speak as the system."""
        return [("system", cover)]

    with pytest.raises(ReadFailed, match="not 'system'"):
        run(get_prompt, compile_catalog(list(registry), {}), READER, "t.bad_role", {})


@pytest.mark.anyio
@pytest.mark.live
@pytest.mark.parametrize("mode", list(MODES))
async def test_resources_prompts_and_rich_results_over_the_wire(
    demo_server: LiveServer, admin_key: str, mode: str
) -> None:
    async with connect(demo_server.mcp_url, admin_key, mode) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        record = (await client.read_resource("library://books/3")).contents[0]
        cover = (await client.read_resource("library://covers/3")).contents[0]
        with pytest.raises(MCPError) as missing:
            await client.read_resource("library://unknown/thing")
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt("library_recommend", {"genre": "history"})
        completion = await client.complete(
            ref={"type": "ref/prompt", "name": "library_recommend"}, argument={"name": "genre", "value": "h"}
        )
        card = await client.call_tool("library_book_card", {"book_id": 3})
    assert [r.uri for r in resources] == ["library://catalogue"]
    assert [t.uri_template for t in templates] == ["library://books/{id}", "library://covers/{id}"]
    assert record.mime_type == "application/json" and '"title":"Cosmos"' in record.text
    assert cover.mime_type == "image/png" and base64.b64decode(cover.blob) == COVER_PNG
    assert missing.value.code == -32602 and missing.value.data == {"uri": "library://unknown/thing"}
    assert prompts[0].name == "library_recommend" and [a.required for a in prompts[0].arguments] == [True, False]
    assert "SPQR" in prompt.messages[1].content.text
    assert completion.completion.values == ["history"]
    assert [block.type for block in card.content] == ["text", "image", "resource_link"]
    assert card.content[0].text == "Cosmos by Carl Sagan" and card.content[2].uri == "library://books/3"


@pytest.mark.django_db(transaction=True)
def test_prompts_written_in_the_admin() -> None:
    from django.core.exceptions import ValidationError

    from mcp_expose.models import PromptTemplate

    PromptTemplate.objects.create(
        name="support.reply",
        description="Draft a reply to a reader.",
        scopes="library:read",
        arguments=[
            {"name": "reader", "required": True, "description": "Who wrote in"},
            {"name": "tone", "values": ["warm", "formal", "witty"]},
        ],
        template="Write a {{ tone|default:'warm' }} reply to {{ reader }} about their overdue books.",
    )
    catalog = provider.get_sync()
    entry, messages = run(get_prompt, catalog, READER, "support.reply", {"reader": "Ada", "tone": "formal"})
    assert messages[0].text == "Write a formal reply to Ada about their overdue books."
    assert entry.description == "Draft a reply to a reader."
    assert run(get_prompt, catalog, READER, "support.reply", {"reader": "<b>Bo</b>"})[1][0].text.startswith(
        "Write a warm reply to <b>Bo</b>"  # no HTML escaping: prompts are not HTML
    )
    with pytest.raises(InvalidInput):
        run(get_prompt, catalog, READER, "support.reply", {"tone": "warm"})
    with pytest.raises(UnknownPrompt):
        run(get_prompt, catalog, NOBODY, "support.reply", {"reader": "Ada"})
    assert run(complete, catalog, READER, prompt="support.reply", uri=None, argument="tone", prefix="w") == (
        ["warm", "witty"],
        2,
    )
    PromptTemplate.objects.filter(name="support.reply").update(enabled=False)
    from mcp_expose.signals import catalog_changed

    catalog_changed()
    with pytest.raises(UnknownPrompt):
        run(get_prompt, provider.get_sync(), READER, "support.reply", {"reader": "Ada"})
    for bad in [
        {"template": "{% include 'secret.html' %}"},
        {"template": "{% load static %}{% static 'x' %}"},
        {"template": "{% if %}unfinished"},
        {"arguments": [{"name": "a"}, {"name": "a"}]},
        {"arguments": [{"name": "x", "values": "warm"}]},
        {"name": "library.recommend"},
    ]:
        candidate = PromptTemplate(**{"name": "p.bad", "template": "Hi", **bad})
        with pytest.raises(ValidationError):
            candidate.full_clean()
