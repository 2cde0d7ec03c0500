"""Rendering report blocks to Markdown and self-contained HTML."""

from __future__ import annotations

from atpsim.report.document import (
    Code,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)


def document() -> Document:
    doc = Document("Run <1>")
    doc.add(
        Heading("Tables"),
        Paragraph("a & b"),
        Table(["x|y", "z"], [["1", "a|b"]], "cap"),
        Code("name: x\n", "yaml"),
    )
    return doc


def test_markdown_escapes_pipes_in_cells():
    md = to_markdown(document())
    assert md.startswith("# Run <1>\n\n## Tables\n\na & b\n\n**cap**\n\n")
    assert "| x\\|y | z |\n|---|---|\n| 1 | a\\|b |" in md
    assert "```yaml\nname: x\n```\n" in md


def test_html_escapes_text_and_embeds_figures(tmp_path):
    (tmp_path / "f.svg").write_text("<svg/>")
    doc = document()
    doc.add(Figure("f.png", "f.svg", "a <figure>"))
    page = to_html(doc, tmp_path)
    assert "<title>Run &lt;1&gt;</title>" in page and "<p>a &amp; b</p>" in page
    assert '<img alt="a &lt;figure&gt;" src="data:image/svg+xml;base64,PHN2Zy8+">' in page
    assert "<td>a|b</td>" in page and "http" not in page
