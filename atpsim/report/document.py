r"""A report as a list of blocks, rendered twice: Markdown (figures linked) and one
self-contained HTML page (figures embedded as base64 SVG, no external files, no scripts).

Text (paragraphs, list items, table cells, captions) is written in a small Markdown subset:
```code```, ``**bold**``, ``*italic*``, ``[text](link)`` and a backslash before one of
``\`*[]()`` for that character itself (:func:`md_escape` writes a name from a user that way,
a folder or scenario name, so its brackets cannot open a link). report.md keeps it as
written; the HTML page renders it (everything else escaped), so no backtick or asterisk leaks
into the page. Text may come from a user (a scenario's name, description, labels, a folder's
name), so neither page has a live link outside :func:`safe_href` (relative, http, https,
mailto: no ``javascript:``), and report.md writes a ``<`` outside code as ``&lt;`` (Markdown
passes raw HTML through).

The HTML page is laid out to read on a phone as on a desktop: a viewport meta tag, every
table in a box that scrolls sideways instead of widening the page, long tables in a box of
limited height under a folded :class:`Details`, and figures scaled to the page width.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """Text in the Markdown subset of the module docstring; *note*: set in small grey type
    (provenance, units)."""

    text: str
    note: bool = False


@dataclass(frozen=True)
class Bullets:
    """A bulleted list; each item is text in the Markdown subset."""

    items: Sequence[str]


@dataclass(frozen=True)
class Code:
    text: str
    language: str = ""


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells; *caption* goes above it."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """A figure saved as ``<stem>.png`` and ``<stem>.svg``; paths relative to the report."""

    png: str
    svg: str
    caption: str


@dataclass(frozen=True)
class Details:
    """*blocks* folded under a one-line *summary*: closed until the reader opens it (HTML
    ``<details>``; report.md uses the same tag, which GitHub and most viewers fold too)."""

    summary: str
    blocks: Sequence[Block]


Block = Heading | Paragraph | Bullets | Code | Table | Figure | Details


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


def _md_cell(text: str) -> str:
    return md_text(text).replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    lines = [f"**{md_text(table.caption)}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_md_cell(h) for h in table.header) + " |")
    lines.append("|" + "---|" * len(table.header))
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + md_text(block.text)
    if isinstance(block, Paragraph):
        return md_text(block.text)
    if isinstance(block, Bullets):
        return "\n".join(f"- {md_text(item)}" for item in block.items)
    if isinstance(block, Code):
        return f"```{block.language}\n{block.text.rstrip()}\n```"
    if isinstance(block, Table):
        return _md_table(block)
    if isinstance(block, Details):
        inner = "\n\n".join(_md_block(b) for b in block.blocks)
        return f"<details><summary>{html.escape(block.summary)}</summary>\n\n{inner}\n\n</details>"
    caption = md_text(block.caption)
    return f"![{caption}]({block.png})\n\n*{caption}* ([SVG]({block.svg}))"


def to_markdown(document: Document) -> str:
    """The Markdown text of *document* (figures as links to their PNG and SVG files)."""
    parts = [f"# {md_text(document.title)}", *(_md_block(b) for b in document.blocks)]
    return "\n\n".join(parts) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 1.5rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
p, li, figcaption, summary, .caption { overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; margin: 0.3rem 0 1.5rem; }
details .scroll { max-height: 75vh; overflow-y: auto; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
td.n { text-align: right; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; }
.caption { font-weight: bold; margin: 1rem 0 0.2rem; }
.note { color: #555; font-size: 0.88rem; margin: 0.2rem 0; }
pre { background: #f6f6f6; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
code { background: #f3f3f3; padding: 0 0.2em; } pre code { background: none; padding: 0; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; }
figcaption { font-style: italic; }
details { margin: 0.5rem 0 1.5rem; } summary { cursor: pointer; font-weight: bold; }
@media (max-width: 40rem) { body { padding: 0 0.5rem; margin: 0.8rem auto; }
                            table { font-size: 0.78rem; } h1 { font-size: 1.5rem; } }
"""

#: The Markdown subset of the module docstring: an escaped character, code, bold, italic,
#: link (one per match).
_INLINE = re.compile(
    r"\\(?P<escaped>[\\`*\[\]()])"
    r"|`(?P<code>[^`]+)`"
    r"|\*\*(?P<bold>\S(?:.*?\S)?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^\s*](?:[^*]*?[^\s*])?)\*(?![\w*])"
    r"|\[(?P<text>(?:\\.|[^\]\\])+)\]\((?P<href>[^)\s]+)\)"
)
#: The URL schemes a link may have (a link without one is relative, to a file of the reports).
SAFE_SCHEMES = ("http", "https", "mailto")
_SPECIAL = re.compile(r"([\\`*\[\]()])")


def md_escape(text: str) -> str:
    r"""*text* (a name from a user: a folder, a scenario, a label) as Markdown-subset text that
    reads as itself: each of ``\`*[]()`` behind a backslash."""
    return _SPECIAL.sub(r"\\\1", text)


def safe_href(href: str) -> bool:
    """Whether *href* may be a live link: relative (no scheme before its first ``/ ? #``) or
    one of :data:`SAFE_SCHEMES`. A browser drops control characters and blanks from a scheme
    (``java\tscript:``), so they are dropped here before it is read."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", href)
    head = re.split(r"[/?#]", cleaned, maxsplit=1)[0]
    return ":" not in head or head.split(":", 1)[0].lower() in SAFE_SCHEMES


def inline_html(text: str) -> str:
    """*text* (the Markdown subset) as HTML: markup rendered, everything else escaped; a link
    that is not :func:`safe_href` is its text alone."""
    out, end = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[end : match.start()]))
        end = match.end()
        if match["escaped"] is not None:
            out.append(html.escape(match["escaped"]))
        elif match["code"] is not None:
            out.append(f"<code>{html.escape(match['code'])}</code>")
        elif match["bold"] is not None:
            out.append(f"<strong>{inline_html(match['bold'])}</strong>")
        elif match["em"] is not None:
            out.append(f"<em>{inline_html(match['em'])}</em>")
        elif safe_href(match["href"]):
            out.append(f'<a href="{html.escape(match["href"])}">{inline_html(match["text"])}</a>')
        else:
            out.append(inline_html(match["text"]))
    out.append(html.escape(text[end:]))
    return "".join(out)


def md_text(text: str) -> str:
    """*text* (the Markdown subset) as report.md writes it: as given, except a link that is
    not :func:`safe_href` (its text alone) and a ``<`` outside code (``&lt;``, so no HTML
    from a user reaches a Markdown viewer that renders it)."""
    out, end = [], 0
    for match in _INLINE.finditer(text):
        out.append(text[end : match.start()].replace("<", "&lt;"))
        end = match.end()
        if match["text"] is not None and not safe_href(match["href"]):
            out.append(md_text(match["text"]))
        elif match["code"] is not None or match["escaped"] is not None:
            out.append(match[0])
        else:
            out.append(match[0].replace("<", "&lt;"))
    out.append(text[end:].replace("<", "&lt;"))
    return "".join(out)


_NUMBER = re.compile(r"-?\d[\d.]*(?:e[-+]?\d+)?")


def _numeric(rows: Sequence[Sequence[str]], column: int) -> bool:
    """Whether every filled cell of *column* is a plain number (right-aligned then)."""
    cells = [row[column] for row in rows if column < len(row) and row[column]]
    return bool(cells) and all(_NUMBER.fullmatch(c) for c in cells)


def _html_table(table: Table) -> str:
    caption = f'<p class="caption">{inline_html(table.caption)}</p>' if table.caption else ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    opening = ['<td class="n">' if _numeric(table.rows, k) else "<td>" for k in range(len(table.header))]
    body = "".join(
        "<tr>" + "".join(f"{opening[k]}{inline_html(c)}</td>" for k, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    return (
        f'{caption}<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _html_figure(figure: Figure, base: Path) -> str:
    data = base64.b64encode((base / figure.svg).read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(figure.caption)}" '
        f'src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{inline_html(figure.caption)}</figcaption></figure>"
    )


def _html_block(block: Block, base: Path) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{inline_html(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f'<p class="note">{inline_html(block.text)}</p>' if block.note else (
            f"<p>{inline_html(block.text)}</p>")  # fmt: skip
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Code):
        return f"<pre><code>{html.escape(block.text.rstrip())}</code></pre>"
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, Details):
        inner = "\n".join(_html_block(b, base) for b in block.blocks)
        return f"<details><summary>{inline_html(block.summary)}</summary>\n{inner}\n</details>"
    return _html_figure(block, base)


def to_html(document: Document, base: Path) -> str:
    """One self-contained HTML page of *document*; figure files are read relative to *base*."""
    parts = [f"<h1>{inline_html(document.title)}</h1>"]
    parts += [_html_block(block, base) for block in document.blocks]
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(document.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
