"""Markdown from an archive, as safe HTML (pure): what the viewer and `export --format html` show.

Design idea: archived text is whatever a model or a user wrote, so it is data: the renderer
(markdown-it, CommonMark with tables and strikethrough) escapes every raw HTML tag, refuses
`javascript:`-style links (its link check), and renders no images (an image would load something
from elsewhere: a page or an exported file stays self-contained). Fenced code stays code, in a
`<pre><code class="language-x">` block the stylesheet makes readable.
"""

from __future__ import annotations

import functools

from markdown_it import MarkdownIt

RENDER_MAX = 200_000  # characters rendered as Markdown; a longer text is shown as plain text


@functools.cache
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")
    return md


def render_markdown(text: str) -> str:
    """Safe HTML of a Markdown text (a very long one: escaped, in a `<pre>`)."""
    if len(text) > RENDER_MAX:
        return "<pre>" + escape(text) + "</pre>"
    return str(_renderer().render(text))


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
