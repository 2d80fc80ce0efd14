"""Django middleware around an in-process view call, for views that rely on what middleware sets.

A view-backed call never passes through Django's handler, so the project's MIDDLEWARE does not run.
`VIEW_MIDDLEWARE` names the middleware that does (tenant, locale and the like). The chain is built
once per setting value, as `BaseHandler.load_middleware` builds Django's for sync requests: each
factory is called with the next handler (`MiddlewareMixin` classes and function middleware alike),
`MiddlewareNotUsed` leaves one out, and the `process_view`, `process_exception` and
`process_template_response` hooks run where Django runs them. A middleware that answers by itself
returns that response in place of the view's. Unlike Django's handler, an exception the view raises
is not turned into an error page: it travels up to the dispatcher, which maps it as for any tool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from mcp_expose.core.conf import get_settings

Handler = Callable[[HttpRequest], HttpResponse]
# Where the innermost handler finds the view and its keyword arguments (Django resolves them from the path).
VIEW_ATTRIBUTE = "_mcp_expose_view"


# What opentelemetry-instrumentation-django puts in MIDDLEWARE when it instruments Django: a view-backed call runs it
# too (first), so that the view's span is made as for a request over HTTP, under the call's `mcp_expose.invoke`.
DJANGO_TRACING_MIDDLEWARE = "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"


def run_view(callback: Callable[..., HttpResponse], request: HttpRequest, kwargs: Mapping[str, Any]) -> HttpResponse:
    """Call the view for `request`, inside the `VIEW_MIDDLEWARE` chain when there is one (and Django's tracing
    middleware, when a project traces Django)."""
    paths = tuple(get_settings().VIEW_MIDDLEWARE)
    if DJANGO_TRACING_MIDDLEWARE in settings.MIDDLEWARE and DJANGO_TRACING_MIDDLEWARE not in paths:
        paths = (DJANGO_TRACING_MIDDLEWARE, *paths)
    if not paths:
        return callback(request, **kwargs)
    setattr(request, VIEW_ATTRIBUTE, (callback, dict(kwargs)))
    return view_chain(paths)(request)


def middleware_factory(path: Any) -> Callable[[Handler], Any]:
    """The middleware a dotted path names, or ImproperlyConfigured saying what is wrong with it."""
    if not isinstance(path, str) or not path:
        raise ImproperlyConfigured(f"VIEW_MIDDLEWARE entries are dotted paths; {path!r} is not one.")
    try:
        factory = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"VIEW_MIDDLEWARE names {path!r}, which cannot be imported: {exc}") from exc
    if not callable(factory):
        raise ImproperlyConfigured(f"VIEW_MIDDLEWARE names {path!r}, which is not a middleware factory.")
    if not getattr(factory, "sync_capable", True):
        raise ImproperlyConfigured(
            f"VIEW_MIDDLEWARE names {path!r}, which is async-only; views are called synchronously."
        )
    return factory


@lru_cache(maxsize=8)
def view_chain(paths: tuple[str, ...]) -> Handler:
    """The handler that runs `paths` around the view, outermost first (built once per setting value)."""
    inner = _ViewHandler()
    handler: Handler = inner
    for path in reversed(paths):
        factory = middleware_factory(path)
        try:
            instance = factory(handler)
        except MiddlewareNotUsed:
            continue
        if instance is None:
            raise ImproperlyConfigured(f"Middleware factory {path} returned None.")
        if hasattr(instance, "process_view"):
            inner.view_hooks.insert(0, instance.process_view)
        if hasattr(instance, "process_template_response"):
            inner.template_hooks.append(instance.process_template_response)
        if hasattr(instance, "process_exception"):
            inner.exception_hooks.append(instance.process_exception)
        handler = instance
    return handler


class _ViewHandler:
    """The innermost handler: Django's `_get_response` for a view already resolved."""

    def __init__(self) -> None:
        self.view_hooks: list[Callable[..., HttpResponse | None]] = []
        self.template_hooks: list[Callable[..., HttpResponse]] = []
        self.exception_hooks: list[Callable[..., HttpResponse | None]] = []

    def __call__(self, request: HttpRequest) -> HttpResponse:
        callback, kwargs = getattr(request, VIEW_ATTRIBUTE)
        response = _first(hook(request, callback, (), kwargs) for hook in self.view_hooks)
        if response is None:
            response = self._guarded(request, lambda: callback(request, **kwargs))
        _check(response, callback)
        if callable(getattr(response, "render", None)):
            for hook in self.template_hooks:
                response = hook(request, response)
                _check(response, hook)
            response = self._guarded(request, cast(Any, response).render)  # a TemplateResponse
        return response

    def _guarded(self, request: HttpRequest, call: Callable[[], HttpResponse]) -> HttpResponse:
        """`call()`, or the response a `process_exception` hook gives for what it raised (else it propagates)."""
        try:
            return call()
        except Exception as exc:
            response = _first(hook(request, exc) for hook in self.exception_hooks)
            if response is None:
                raise
            return response


def _first(responses: Iterable[HttpResponse | None]) -> HttpResponse | None:
    return next((response for response in responses if response is not None), None)


def _check(response: Any, origin: Any) -> None:
    """As Django's handler refuses it: a view or hook that gave no response is a bug in it."""
    if response is None:
        name = getattr(origin, "__qualname__", None) or type(origin).__qualname__
        raise ValueError(f"{getattr(origin, '__module__', '?')}.{name} didn't return an HttpResponse object.")
