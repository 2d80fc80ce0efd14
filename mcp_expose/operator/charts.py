"""Small server-side SVG charts for the usage dashboard: no JavaScript, no CDN, readable by screen readers."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe


def bar_chart(
    values: Sequence[float], *, label: str, width: int = 240, height: int = 48, color: str = "#417690"
) -> SafeString:
    """Vertical bars, one per value (e.g. calls per hour), scaled to the largest."""
    peak = max(values) if values and max(values) > 0 else 1
    bar_width = width / max(len(values), 1)
    bars = []
    for index, value in enumerate(values):
        bar_height = 0 if value <= 0 else max(1.0, (value / peak) * (height - 2))
        bars.append(
            f'<rect x="{index * bar_width:.2f}" y="{height - bar_height:.2f}" width="{max(bar_width - 1, 1):.2f}" '
            f'height="{bar_height:.2f}" fill="{color}"><title>{escape(str(value))}</title></rect>'
        )
    return _svg(label, width, height, "".join(bars))


def meter(fraction: float, *, label: str, width: int = 160, height: int = 14, color: str = "#ba2121") -> SafeString:
    """A horizontal bar for a rate between 0 and 1."""
    fraction = min(max(fraction, 0.0), 1.0)
    body = (
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#eee"></rect>'
        f'<rect x="0" y="0" width="{fraction * width:.2f}" height="{height}" fill="{color}"></rect>'
    )
    return _svg(label, width, height, body)


def _svg(label: str, width: int, height: int, body: str) -> SafeString:
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" height="{}" '
        'viewBox="0 0 {} {}"><title>{}</title>{}</svg>',
        label,
        width,
        height,
        width,
        height,
        label,
        mark_safe(body),  # noqa: S308  (body is built from numbers)
    )
