"""Security headers for the approver inbox and the approvals API; ADK's own routes are left as ADK serves them.

The page's Content-Security-Policy allows only its own files and this server (docs/security.md, "Identities").
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",  # the page's empty data: favicon
    "base-uri 'none'",
    "form-action 'none'",  # the sign-in form is handled by the script, never posted
    "frame-ancestors 'none'",
])
API_POLICY = "default-src 'none'; frame-ancestors 'none'"

_COMMON = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
PAGE_HEADERS = _COMMON | {"Content-Security-Policy": PAGE_POLICY}
# Approvers' data: never kept in a shared or browser cache.
API_HEADERS = _COMMON | {"Content-Security-Policy": API_POLICY, "Cache-Control": "no-store"}


def headers_for(path: str) -> dict[str, str] | None:
    if path == "/inbox" or path.startswith("/inbox/"):
        return PAGE_HEADERS
    if path == "/api/approvals" or path.startswith("/api/approvals/"):
        return API_HEADERS
    return None


class SecurityHeaders:
    """Add `headers_for(path)` to every answer on the inbox's paths, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wanted = headers_for(scope["path"]) if scope["type"] == "http" else None
        if wanted is None:
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in wanted.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)
