"""A report as a list of blocks, rendered twice: Markdown (figures linked) and one
self-contained HTML page (figures embedded as base64 SVG, no external files).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """Plain text (Markdown inline syntax is left as is in report.md and escaped in HTML)."""

    text: str


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


@dataclass
class Document:
    title: str
    blocks: list[Heading | Paragraph | Code | Table | Figure] = field(default_factory=list)

    def add(self, *blocks: Heading | Paragraph | Code | Table | Figure) -> None:
        self.blocks.extend(blocks)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    lines = [f"**{table.caption}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_md_cell(h) for h in table.header) + " |")
    lines.append("|" + "---|" * len(table.header))
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def to_markdown(document: Document) -> str:
    """The Markdown text of *document* (figures as links to their PNG and SVG files)."""
    parts = [f"# {document.title}"]
    for block in document.blocks:
        if isinstance(block, Heading):
            parts.append("#" * block.level + " " + block.text)
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Code):
            parts.append(f"```{block.language}\n{block.text.rstrip()}\n```")
        elif isinstance(block, Table):
            parts.append(_md_table(block))
        else:
            parts.append(
                f"![{block.caption}]({block.png})\n\n*{block.caption}* ([SVG]({block.svg}))"
            )
    return "\n\n".join(parts) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }
th { background: #f3f3f3; }
caption { text-align: left; font-weight: bold; padding: 0.3rem 0; }
pre { background: #f6f6f6; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; }
figcaption { font-style: italic; }
"""


def _html_table(table: Table) -> str:
    esc = html.escape
    caption = f"<caption>{esc(table.caption)}</caption>" if table.caption else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_figure(figure: Figure, base: Path) -> str:
    data = base64.b64encode((base / figure.svg).read_bytes()).decode("ascii")
    caption = html.escape(figure.caption)
    return (
        f'<figure><img alt="{caption}" src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def to_html(document: Document, base: Path) -> str:
    """One self-contained HTML page of *document*; figure files are read relative to *base*."""
    esc = html.escape
    parts = [f"<h1>{esc(document.title)}</h1>"]
    for block in document.blocks:
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{esc(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{esc(block.text)}</p>")
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{esc(block.text.rstrip())}</code></pre>")
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        else:
            parts.append(_html_figure(block, base))
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc(document.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
